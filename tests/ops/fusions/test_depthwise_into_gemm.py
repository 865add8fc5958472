"""depthwise_into_gemm: a depthwise convolution run by the 1x1 convolution that alone
reads it, whose GEMM computes each depthwise output as it loads it
(opencl/fusions/depthwise_into_gemm.py)."""

from __future__ import annotations

import numpy as np
import pytest

from delegate_runtime.gpu.opencl.fusions import depthwise_into_gemm, pad_into_reader
from delegate_runtime.gpu.switches import DEFAULTS
from tests.ops.fusions.plans import fused_equals_unfused, kernels, plan
from tests.ops.test_gpu_fusion import F, _graph, _same_conv, _same_depthwise
from tests.ops.test_gpu_ops import opencl_device, randn

__all__ = ["opencl_device"]  # the fixture, re-exported for this module's tests

DW, CONV = 0, 1  #: the nodes of separable (without a PAD)


def separable(hw: tuple[int, int], c: int, cout: int, pad: bool = False):
    """[PAD ->] 3x3 depthwise (c channels) -> 1x1 conv (c -> cout): the model and its
    inputs."""
    b, g, (x,), ins = _graph((1, *hw, c))
    if pad:
        padded = g.tensor("padded", (1, hw[0] + 2, hw[1] + 2, c), F)
        amounts = np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32)
        g.op("PAD", [x, g.const("pads", amounts)], [padded])
        d = g.tensor("d", (1, *hw, c), F)
        w, bias = g.const("dw", randn("sdw", 1, 3, 3, c)), g.const("db", randn("sdb", c))
        g.op(
            "DEPTHWISE_CONV_2D",
            [padded, w, bias],
            [d],
            padding="VALID",
            stride_h=1,
            stride_w=1,
            depth_multiplier=1,
        )
    else:
        d = g.tensor("d", (1, *hw, c), F)
        w, bias = g.const("dw", randn("sdw", 1, 3, 3, c)), g.const("db", randn("sdb", c))
        _same_depthwise(g, [x, w, bias], d, "RELU6")
    y = g.tensor("y", (1, *hw, cout), F)
    pw = g.const("pw", randn("spw", cout, 1, 1, c, scale=1 / np.sqrt(c)))
    _same_conv(g, [d, pw, g.const("pb", randn("spb", cout))], y)
    g.output(y)
    return b.build(), ins


def test_the_gemm_computes_the_depthwise_output():
    model, _ = separable((6, 7), 8, 8)
    chains = plan(model)
    assert kernels(chains) == {CONV: (DW,)}
    assert chains[CONV].input_depthwise == DW
    assert kernels(plan(model, depthwise_into_gemm.NAME)) == {}


def test_the_depthwise_pad_goes_with_it():
    pad, dw, conv = 0, 1, 2
    model, _ = separable((6, 7), 8, 8, pad=True)
    assert kernels(plan(model)) == {conv: (dw, pad)}
    assert kernels(plan(model, pad_into_reader.NAME)) == {conv: (dw,)}


def test_a_wide_reader_of_a_large_map_recomputes_too_often():
    """Stride 1, past the switches' depthwise_small_map_pixels and
    depthwise_max_reader_channels; the session's limit is the one the rule reads."""
    wide = DEFAULTS.depthwise_max_reader_channels + 32
    model, _ = separable((10, 10), 16, wide)
    assert kernels(plan(model)) == {}
    raised = DEFAULTS.replace(depthwise_max_reader_channels=wide)
    assert kernels(plan(model, switches=raised)) == {CONV: (DW,)}


@pytest.mark.parametrize(
    "limit",
    [
        {"depthwise_aligned": 3},  # 8 channels, not a multiple of 3
        {"depthwise_max_gemm_macs": 9 * 100 * 8 - 1},  # one 32-wide tile of 3x3 x 10x10x8
        {"depthwise_max_reader_channels": 7},  # stride 1, 8 output channels
    ],
)
def test_each_limit_off_a_small_map_is_the_switches(limit):
    """On a 10x10 map (past depthwise_small_map_pixels), each limit set below this block
    keeps the depthwise convolution its own launch."""
    model, _ = separable((10, 10), 8, 8)
    assert kernels(plan(model)) == {CONV: (DW,)}
    assert kernels(plan(model, switches=DEFAULTS.replace(**limit))) == {}


def test_a_small_map_takes_the_small_map_limits():
    """Below depthwise_small_map_pixels the reader's channels may reach
    depthwise_small_map_channels, whatever the other limits say."""
    model, _ = separable((6, 7), 8, 8)
    strict = DEFAULTS.replace(depthwise_max_reader_channels=7, depthwise_aligned=3)
    assert kernels(plan(model, switches=strict)) == {CONV: (DW,)}
    assert kernels(plan(model, switches=strict.replace(depthwise_small_map_pixels=41))) == {}
    assert kernels(plan(model, switches=strict.replace(depthwise_small_map_channels=7))) == {}


@pytest.mark.gpu
def test_the_gemm_computes_the_depthwise_convolution(opencl_device, monkeypatch):
    model, ins = separable((6, 7), 8, 8)
    fused, plain = fused_equals_unfused(monkeypatch, model, ins, depthwise_into_gemm.NAME)
    assert len(fused) == len(plain) - 1, (fused, plain)
