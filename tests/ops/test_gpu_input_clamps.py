"""A RELU elided into its readers, against LiteRT's reference kernels.

NASNet's cells apply a RELU to each input of every separable convolution while other
branches read that input unclamped, so no kernel can absorb the RELU after its producer.
Where every reader is a 1x1 convolution (a GEMM), a depthwise convolution that such a
GEMM computes as it loads, or a depthwise convolution on the general kernel, the RELU
launches nothing: each reader clamps the values it
loads (opencl/fusions/relu_into_readers.py). Each case checks the outputs against LiteRT
(BUILTIN_REF) in both precisions, that no kernel of its own ran for the RELU, and which
kernel is named after it.
"""

from __future__ import annotations

import io

import numpy as np
import pytest

from delegate_runtime import read_model
from tests.conftest import require_module
from tests.ops.test_gpu_fusion import Built, _graph, _same_conv, check_against_litert
from tests.ops.test_gpu_ops import PRECISIONS, opencl_device, randn
from tests.switched import switched

require_module("pyopencl", "pyopencl (the GPU delegate's OpenCL binding)")

__all__ = ["opencl_device"]  # the fixture, re-exported for this module's tests

F = np.float32
SHAPE = (1, 7, 6, 8)


def _pointwise(g, x, cin, cout, name, act="NONE"):
    y = g.tensor(name, (*SHAPE[:3], cout), F)
    w = randn(name + "w", cout, 1, 1, cin, scale=1 / np.sqrt(cin))
    _same_conv(g, [x, g.const(name + "w", w), g.const(name + "b", randn(name + "b", cout))], y, act)
    return y


def _depthwise(g, x, name, k=3):
    y = g.tensor(name, SHAPE, F)
    c = SHAPE[-1]
    w, bias = randn(name + "w", 1, k, k, c), randn(name + "b", c)
    g.op(
        "DEPTHWISE_CONV_2D",
        [x, g.const(name + "w", w), g.const(name + "b", bias)],
        [y],
        padding="SAME",
        stride_h=1,
        stride_w=1,
        depth_multiplier=1,
    )
    return y


def _relu(g, x, kind, name="r", channels=SHAPE[-1]):
    y = g.tensor(name, (*SHAPE[:3], channels), F)
    g.op(kind, [x], [y])
    return y


def _add(g, a, b, name):
    y = g.tensor(name, SHAPE, F)
    g.op("ADD", [a, b], [y])
    return y


def separable_branches(kind: str) -> Built:
    """1x1 conv h -> RELU -> two separable convolutions (3x3 and 5x5 depthwise, each
    computed by its 1x1 GEMM); h is also read unclamped by the ADD of their results."""
    b, g, (x,), ins = _graph(SHAPE)
    ins[0] *= 4  # past RELU6's 6 too
    h = _pointwise(g, x, 8, 8, "h")
    r = _relu(g, h, kind)
    s1 = _pointwise(g, _depthwise(g, r, "d1"), 8, 8, "s1")
    s2 = _pointwise(g, _depthwise(g, r, "d2", k=5), 8, 8, "s2")
    g.output(_add(g, _add(g, s1, s2, "a1"), h, "a2"))
    return Built(b.build(), ins, ())


def general_depthwise(kind: str, k: int = 5) -> Built:
    """1x1 conv h -> RELU -> a k x k depthwise convolution on its own kernel (a model
    output); h is a model output too, so no kernel absorbs the RELU after it."""
    b, g, (x,), ins = _graph(SHAPE)
    ins[0] *= 4  # past RELU6's 6 too
    h = _pointwise(g, x, 8, 8, "h")
    g.output(_depthwise(g, _relu(g, h, kind), "d", k=k))
    g.output(h)
    return Built(b.build(), ins, ())


def concat_into_gemms() -> Built:
    """CONCATENATION (a model output too) -> RELU -> two 1x1 convolutions, each reading
    the concatenation through its clamp."""
    half = (*SHAPE[:3], 4)
    b, g, xs, ins = _graph(half, half)
    c = g.tensor("c", SHAPE, F)
    g.op("CONCATENATION", xs, [c], axis=3)
    r = _relu(g, c, "RELU")
    g.output(_pointwise(g, r, 8, 8, "p1"))
    g.output(_pointwise(g, r, 8, 12, "p2"))
    g.output(c)
    return Built(b.build(), ins, ())


def _session(model: bytes, precision: str = "fp32"):
    from delegate_runtime.gpu.delegate import GpuSession

    return GpuSession(read_model(model), precision=precision, log=io.StringIO())


def _relu_node(model: bytes) -> int:
    ops = read_model(model).subgraphs[0].operators
    return next(op.index for op in ops if op.op.startswith("RELU"))


CASES = {
    "separable-relu": (lambda: separable_branches("RELU"), "gemm32dwv"),
    "separable-relu6": (lambda: separable_branches("RELU6"), "gemm32dwv"),
    "concatenation-gemms": (concat_into_gemms, "gemm32v"),
    # NASNet's first cells: a RELU before an odd-channel depthwise kernel of its own
    "general-depthwise-relu": (lambda: general_depthwise("RELU"), "depthwise_conv2d"),
    "general-depthwise-relu6": (lambda: general_depthwise("RELU6"), "depthwise_conv2d"),
}


@pytest.mark.parametrize(
    "make,kernel,precision",
    [pytest.param(m, k, p, id=f"{n}-{p}") for n, (m, k) in CASES.items() for p in PRECISIONS],
)
def test_relu_read_by_gemms_launches_nothing(opencl_device, monkeypatch, make, kernel, precision):
    # the 32-wide tile on any device (the 16-wide one is the same code: depthwise fusion tests)
    switched(monkeypatch, depthwise_small_tile_groups_per_cu=0.0)
    built = make()
    session = check_against_litert(built.model, built.inputs, precision, runs=2)
    ex = session.executors[0]
    names = ex.kernel_names
    assert "unary" not in names, names
    relu = _relu_node(built.model)
    named = [name for name, covers in zip(names, ex.covers, strict=True) if relu in covers]
    assert named == [kernel], (named, names)  # one kernel is named after it


def test_relu_with_a_reader_that_cannot_clamp_keeps_its_kernel(opencl_device):
    """An ADD reads the RELU too: it runs as its own kernel, and the GEMM reads its output."""
    b, g, (x,), ins = _graph(SHAPE)
    h = _pointwise(g, x, 8, 8, "h")
    r = _relu(g, h, "RELU")
    g.output(_add(g, _pointwise(g, r, 8, 8, "p"), r, "a"))
    g.output(h)
    model = b.build()
    session = check_against_litert(model, ins, "fp32")
    names = session.executors[0].kernel_names
    assert "unary" in names, names


def test_relu_before_a_3x3_depthwise_kernel_keeps_its_kernel(opencl_device):
    """The 3x3 depthwise kernels load four channels at a time and do not clamp."""
    built = general_depthwise("RELU", k=3)
    session = check_against_litert(built.model, built.inputs, "fp32")
    names = session.executors[0].kernel_names
    assert "unary" in names and "depthwise3x3_c4" in names, names


def test_a_relu_leaving_the_model_keeps_its_kernel(opencl_device):
    b, g, (x,), ins = _graph(SHAPE)
    h = _pointwise(g, x, 8, 8, "h")
    r = _relu(g, h, "RELU")
    g.output(_pointwise(g, r, 8, 8, "p"))
    g.output(r)
    g.output(h)
    session = check_against_litert(b.build(), ins, "fp32")
    names = session.executors[0].kernel_names
    assert "unary" in names, names
