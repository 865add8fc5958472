"""depthwise_into_gemm: a depthwise convolution run by the 1x1 convolution that alone
reads it, whose GEMM computes each depthwise output as it loads it
(opencl/fusions/depthwise_into_gemm.py)."""

from __future__ import annotations

import numpy as np
import pytest

from delegate_runtime.gpu.opencl.fusions import depthwise_into_gemm, pad_into_reader
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
    """Stride 1, past DEPTHWISE_SMALL_MAP_PIXELS and DEPTHWISE_MAX_READER_CHANNELS."""
    model, _ = separable((10, 10), 16, depthwise_into_gemm.DEPTHWISE_MAX_READER_CHANNELS + 32)
    assert kernels(plan(model)) == {}


@pytest.mark.gpu
def test_the_gemm_computes_the_depthwise_convolution(opencl_device, monkeypatch):
    model, ins = separable((6, 7), 8, 8)
    fused, plain = fused_equals_unfused(monkeypatch, model, ins, depthwise_into_gemm.NAME)
    assert len(fused) == len(plain) - 1, (fused, plain)
