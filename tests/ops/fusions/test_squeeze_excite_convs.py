"""squeeze_excite_convs: a MEAN's kernel that also runs the two 1x1 convolutions of a
squeeze-excite on the pixel it makes (opencl/fusions/squeeze_excite_convs.py)."""

from __future__ import annotations

import pytest

from delegate_runtime.gpu.opencl import squeeze_excite as kernel
from delegate_runtime.gpu.opencl.fusions import squeeze_excite_convs
from delegate_runtime.gpu.switches import DEFAULTS
from tests.ops.fusions.plans import fused_equals_unfused, kernels, plan
from tests.ops.test_gpu_fusion import squeeze_excite
from tests.ops.test_gpu_ops import opencl_device

__all__ = ["opencl_device"]  # the fixture, re-exported for this module's tests

#: squeeze_excite()'s nodes: MEAN, 1x1 conv (8 -> 2), its swish (LOGISTIC, MUL), 1x1 conv
#: (2 -> 8), LOGISTIC (the gate), MUL(x, gate)
MEAN, CONV1, SWISH_LOGISTIC, SWISH_MUL, CONV2, GATE, _ = range(7)
WEIGHTS = 8 * 2 + 2 * 8  #: of the two convolutions
#: The kernels without it: the first GEMM computes the MEAN (mean_into_gemm.py)
APART = {CONV1: (MEAN, SWISH_LOGISTIC, SWISH_MUL), CONV2: (GATE,)}


def test_the_mean_runs_both_convolutions():
    model = squeeze_excite().model
    chains = plan(model)
    assert kernels(chains) == {MEAN: (CONV1, SWISH_LOGISTIC, SWISH_MUL, CONV2, GATE)}
    assert [c.producer for c in chains[MEAN].then] == [CONV1, CONV2]
    assert kernels(plan(model, squeeze_excite_convs.NAME)) == APART


def test_weights_past_the_limit_stay_in_their_gemms():
    """The switches' squeeze_excite_max_weights, as the session sets it."""
    model = squeeze_excite().model
    at = DEFAULTS.replace(squeeze_excite_max_weights=WEIGHTS)
    assert kernels(plan(model, switches=at)) == {
        MEAN: (CONV1, SWISH_LOGISTIC, SWISH_MUL, CONV2, GATE)
    }
    below = DEFAULTS.replace(squeeze_excite_max_weights=WEIGHTS - 1)
    assert kernels(plan(model, switches=below)) == APART


def test_channels_past_the_kernel_stay_in_their_gemms(monkeypatch):
    """MAX_CHANNELS is the kernel's SE_MAX (layout, no switch), read at each plan."""
    monkeypatch.setattr(kernel, "MAX_CHANNELS", 7)  # the block's input has 8
    assert kernels(plan(squeeze_excite().model)) == APART


@pytest.mark.gpu
def test_the_squeeze_excite_kernel_computes_the_gate(opencl_device, monkeypatch):
    built = squeeze_excite()
    fused, plain = fused_equals_unfused(
        monkeypatch, built.model, built.inputs, squeeze_excite_convs.NAME
    )
    assert fused.count("squeeze_excite") == 1 and len(fused) == len(plain) - 1, (fused, plain)
