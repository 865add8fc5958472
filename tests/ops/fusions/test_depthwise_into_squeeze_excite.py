"""depthwise_into_squeeze_excite: a squeeze-excite kernel that also computes the depthwise
convolution making its input (opencl/fusions/depthwise_into_squeeze_excite.py)."""

from __future__ import annotations

import pytest

from delegate_runtime.gpu.opencl import squeeze_excite as kernel
from delegate_runtime.gpu.opencl.fusions import depthwise_into_squeeze_excite
from delegate_runtime.gpu.switches import DEFAULTS
from tests.ops.fusions.plans import fused_equals_unfused, plan
from tests.ops.test_gpu_ops import opencl_device
from tests.ops.test_gpu_squeeze_excite import depthwise_block

__all__ = ["opencl_device"]  # the fixture, re-exported for this module's tests

#: depthwise_block's nodes: the depthwise convolution, its swish (LOGISTIC, MUL), MEAN ...
DW, MEAN = 0, 3
CHANNELS = 32


def block():
    return depthwise_block((10, 12), CHANNELS, 8)()


def test_the_squeeze_excite_computes_its_depthwise_input():
    model = block().model
    chains = plan(model)
    assert chains[MEAN].first is not None and chains[MEAN].first.producer == DW
    assert DW not in chains
    alone = plan(model, depthwise_into_squeeze_excite.NAME)
    assert alone[MEAN].first is None and alone[MEAN].then and DW in alone


def test_a_depthwise_past_the_channel_limit_keeps_its_launch():
    """The switches' squeeze_excite_dw_max_channels, as the session sets it."""
    at = DEFAULTS.replace(squeeze_excite_dw_max_channels=CHANNELS)
    assert plan(block().model, switches=at)[MEAN].first is not None
    below = DEFAULTS.replace(squeeze_excite_dw_max_channels=CHANNELS - 1)
    chains = plan(block().model, switches=below)
    assert chains[MEAN].first is None and DW in chains


def test_the_depthwise_work_is_split_by_the_switches():
    """squeeze_excite.depthwise_slicing: the switches' groups per compute unit and the
    last group's loads per item bound the slices (56x56x96 on two compute units)."""
    assert kernel.depthwise_slicing(56 * 56, 96, 2, DEFAULTS) == (3, 1046)
    many = DEFAULTS.replace(squeeze_excite_dw_groups_per_cu=10_000)
    assert kernel.depthwise_slicing(56 * 56, 96, 2, many) == (98, 32)  # a pixel per row
    budget = many.replace(squeeze_excite_dw_tail_loads=3)  # 3 x 256 items / 96 channels
    assert kernel.depthwise_slicing(56 * 56, 96, 2, budget) == (8, 392)


@pytest.mark.gpu
def test_the_squeeze_excite_computes_the_depthwise_convolution(opencl_device, monkeypatch):
    built = block()
    name = depthwise_into_squeeze_excite.NAME
    fused, plain = fused_equals_unfused(monkeypatch, built.model, built.inputs, name)
    assert len(fused) == len(plain) - 1, (fused, plain)
