"""Squeeze-and-excite in one launch (opencl/squeeze_excite.py) against LiteRT's reference
kernels: MEAN over the pixels, a 1x1 convolution with its activation, a second one with
its sigmoid, all in the MEAN's kernel; the gate MUL inside the projection's GEMM."""

from __future__ import annotations

import io
from collections.abc import Callable

import numpy as np
import pytest

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder, Quant
from tests.conftest import require_module
from tests.ops.test_gpu_fusion import (
    Built,
    _binary,
    _graph,
    _int8_pointwise,
    _same_conv,
    _unary,
    check_fused,
    work_kernels,
)
from tests.ops.test_gpu_ops import PRECISIONS, opencl_device, randn
from tests.switched import switched

require_module("pyopencl", "pyopencl (the GPU delegate's OpenCL binding)")

__all__ = ["opencl_device"]  # the fixture, re-exported for this module's tests

F = np.float32


def _one_pixel_conv(g, x, cin, cout, name, act="NONE"):
    y = g.tensor(name, (1, 1, 1, cout), F)
    w = g.const(name + "w", randn(name, cout, 1, 1, cin, scale=1.5 / np.sqrt(cin)))
    _same_conv(g, [x, w, g.const(name + "b", randn(name + "b", cout, scale=0.3))], y, act)
    return y


def float_block(hw: tuple[int, int], c: int, r: int) -> Callable[[], Built]:
    """x -> MEAN -> 1x1 conv (c -> r) + swish -> 1x1 conv (r -> c) -> sigmoid ->
    MUL(x, gate) -> 1x1 projection (c -> 8): the squeeze-excite of EfficientNet."""

    def make() -> Built:
        shape = (1, *hw, c)
        b, g, (x,), ins = _graph(shape)
        m = g.tensor("m", (1, 1, 1, c), F)
        g.op("MEAN", [x, g.const("axes", np.array([1, 2], np.int32))], [m], keep_dims=True)
        s = _one_pixel_conv(g, m, c, r, "s")
        sg_ = _unary(g, "LOGISTIC", s, (1, 1, 1, r), "sg")
        sw = _binary(g, "MUL", s, sg_, (1, 1, 1, r), "sw")
        e = _one_pixel_conv(g, sw, r, c, "e")
        gate = _unary(g, "LOGISTIC", e, (1, 1, 1, c), "gate")
        gated = _binary(g, "MUL", x, gate, shape, "gated")
        p = g.tensor("p", (1, *hw, 8), F)
        w = g.const("pw", randn(f"pw{c}", 8, 1, 1, c, scale=1 / np.sqrt(c)))
        _same_conv(g, [gated, w, g.const("pb", randn("pb", 8))], p, "NONE")
        g.output(p)
        return Built(b.build(), ins, (0, 1, 2, 3, 4, 5))

    return make


def relu_hard_sigmoid_block() -> Built:
    """MobileNet v3's squeeze-excite: 1x1 conv + RELU, 1x1 conv, then hard sigmoid as
    ADD 3 -> RELU6 -> MUL 1/6 (three steps of the second convolution)."""
    shape = (1, 5, 5, 16)
    b, g, (x,), ins = _graph(shape)
    m = g.tensor("m", (1, 1, 1, 16), F)
    g.op("MEAN", [x, g.const("axes", np.array([1, 2], np.int32))], [m], keep_dims=True)
    s = _one_pixel_conv(g, m, 16, 4, "s", act="RELU")
    e = _one_pixel_conv(g, s, 4, 16, "e")
    a = _binary(g, "ADD", e, g.const("three", np.array([3.0], F)), (1, 1, 1, 16), "a", "RELU6")
    gate = _binary(g, "MUL", a, g.const("sixth", np.array([1 / 6], F)), (1, 1, 1, 16), "hs")
    g.output(_binary(g, "MUL", x, gate, shape, "y"))
    return Built(b.build(), ins, (0, 1, 2, 3, 4))


def pooled_block() -> Built:
    """MediaPipe's selfie segmentation: AVERAGE_POOL_2D over the whole map (with a RELU of
    its own) in place of the MEAN, 1x1 conv + RELU, 1x1 conv + sigmoid."""
    shape = (1, 16, 16, 16)
    b, g, (x,), ins = _graph(shape)
    m = g.tensor("m", (1, 1, 1, 16), F)
    g.op(
        "AVERAGE_POOL_2D",
        [x],
        [m],
        padding="VALID",
        stride_h=16,
        stride_w=16,
        filter_height=16,
        filter_width=16,
        fused_activation_function="RELU",
    )
    s = _one_pixel_conv(g, m, 16, 8, "s", act="RELU")
    e = _one_pixel_conv(g, s, 8, 16, "e")
    gate = _unary(g, "LOGISTIC", e, (1, 1, 1, 16), "gate")
    g.output(_binary(g, "MUL", x, gate, shape, "y"))
    return Built(b.build(), [ins[0] - 0.5], (0, 1, 2, 3))  # means below 0: the RELU zeroes them


def quantized_block() -> Built:
    """The same in an int8 model: each of the MEAN, the two convolutions and the sigmoid
    snaps to its own int8 grid inside the one kernel."""
    shape = (1, 12, 12, 8)
    b = ModelBuilder()
    g = b.main
    x = g.input("x", shape, F)
    q = g.tensor("q", shape, np.int8, quant=Quant(0.02, -5))
    g.op("QUANTIZE", [x], [q])
    m = g.tensor("m", (1, 1, 1, 8), np.int8, quant=Quant(0.05, 1))  # coarse: the snap shows
    g.op("MEAN", [q, g.const("axes", np.array([1, 2], np.int32))], [m], version=2, keep_dims=True)
    r = _int8_pointwise(g, m, 0.05, 8, 4, "r", Quant(0.03, -2))
    e = _int8_pointwise(g, r, 0.03, 4, 8, "e", Quant(0.02, 3))
    gate = g.tensor("gate", (1, 1, 1, 8), np.int8, quant=Quant(1 / 256, -128))
    g.op("LOGISTIC", [e], [gate], version=2)
    y = g.tensor("y", shape, np.int8, quant=Quant(0.02, -3))
    g.op("MUL", [q, gate], [y], version=2, fused_activation_function="NONE")
    out = g.tensor("out", shape, F)
    g.op("DEQUANTIZE", [y], [out], version=2)
    g.output(out)
    ins = [np.random.default_rng(21).uniform(-2, 2, shape).astype(F)]
    return Built(b.build(), ins, (1, 2, 3, 4), tol_abs=1.5 * 0.02)  # one output step


def depthwise_block(
    hw: tuple[int, int],
    c: int,
    r: int,
    k: int = 3,
    stride: int = 1,
    pad: tuple[int, int] | None = None,
    mobilenet_v3: bool = False,
) -> Callable[[], Built]:
    """[PAD ->] DEPTHWISE_CONV_2D (k x k, SAME, or VALID after the PAD of (before, after)
    rows and columns) -> swish -> x, then x's squeeze-excite and MUL(x, gate) -> 1x1
    projection: EfficientNet's block from the depthwise on. With `mobilenet_v3`, the
    depthwise has a fused RELU and no swish, and the excite is RELU + hard sigmoid."""

    def make() -> Built:
        b, g, (x0,), ins = _graph((1, *hw, c))
        n = 0  # node index of the depthwise
        src, size, padding = x0, hw, "SAME"
        if pad is not None:
            size = (hw[0] + sum(pad), hw[1] + sum(pad))
            src = g.tensor("padded", (1, *size, c), F)
            amounts = np.array([[0, 0], list(pad), list(pad), [0, 0]], np.int32)
            g.op("PAD", [x0, g.const("pads", amounts)], [src])
            n, padding = 1, "VALID"
        if padding == "SAME":
            out = tuple(-(-d // stride) for d in size)
        else:
            out = tuple((d - k) // stride + 1 for d in size)
        shape = (1, *out, c)
        t = g.tensor("t", shape, F)
        g.op(
            "DEPTHWISE_CONV_2D",
            [
                src,
                g.const("dw", randn(f"dw{c}", 1, k, k, c, scale=0.4)),
                g.const("db", randn("db", c)),
            ],
            [t],
            padding=padding,
            stride_h=stride,
            stride_w=stride,
            depth_multiplier=1,
            fused_activation_function="RELU" if mobilenet_v3 else "NONE",
        )
        x, first = t, (n, *([0] if pad is not None else []))
        if not mobilenet_v3:
            x = _binary(g, "MUL", t, _unary(g, "LOGISTIC", t, shape, "ts"), shape, "x")
            first += (n + 1, n + 2)
        mean = len(first)
        m = g.tensor("m", (1, 1, 1, c), F)
        g.op("MEAN", [x, g.const("axes", np.array([1, 2], np.int32))], [m], keep_dims=True)
        if mobilenet_v3:
            s = _one_pixel_conv(g, m, c, r, "s", act="RELU")
            e = _one_pixel_conv(g, s, r, c, "e")
            three = g.const("three", np.array([3.0], F))
            a = _binary(g, "ADD", e, three, (1, 1, 1, c), "a", "RELU6")
            gate = _binary(g, "MUL", a, g.const("sixth", np.array([1 / 6], F)), (1, 1, 1, c), "g")
            excite = (mean + 1, mean + 2, mean + 3, mean + 4)
        else:
            s = _one_pixel_conv(g, m, c, r, "s")
            sw = _binary(
                g, "MUL", s, _unary(g, "LOGISTIC", s, (1, 1, 1, r), "sg"), (1, 1, 1, r), "sw"
            )
            e = _one_pixel_conv(g, sw, r, c, "e")
            gate = _unary(g, "LOGISTIC", e, (1, 1, 1, c), "gate")
            excite = (mean + 1, mean + 2, mean + 3, mean + 4, mean + 5)
        gated = _binary(g, "MUL", x, gate, shape, "gated")
        p = g.tensor("p", (1, *out, 8), F)
        w = g.const("pw", randn(f"pw{c}", 8, 1, 1, c, scale=1 / np.sqrt(c)))
        _same_conv(g, [gated, w, g.const("pb", randn("pb", 8))], p, "NONE")
        g.output(p)
        return Built(b.build(), ins, (mean, *excite, *first))

    return make


#: Blocks whose squeeze-excite kernel computes the depthwise output it reads, and that
#: kernel: four channels per item where the channels allow.
DEPTHWISE_CASES: dict[str, tuple[Callable[[], Built], str]] = {
    "3x3-swish": (depthwise_block((10, 12), 32, 8), "squeeze_excite_dw4"),
    "pad-5x5-stride2": (
        depthwise_block((21, 21), 48, 12, k=5, stride=2, pad=(1, 2)),
        "squeeze_excite_dw4",
    ),
    "3x3-stride2-same-odd-channels": (
        depthwise_block((9, 9), 30, 6, stride=2),
        "squeeze_excite_dw",
    ),
    "mobilenet-v3": (depthwise_block((7, 7), 72, 24, mobilenet_v3=True), "squeeze_excite_dw4"),
}

CASES: dict[str, Callable[[], Built]] = {
    "3x3-swish": depthwise_block((10, 12), 32, 8),
    "pad-5x5-stride2": depthwise_block((21, 21), 48, 12, k=5, stride=2, pad=(1, 2)),
    "3x3-stride2-same-odd-channels": depthwise_block((9, 9), 30, 6, stride=2),
    "mobilenet-v3": depthwise_block((7, 7), 72, 24, mobilenet_v3=True),
}

CASES: dict[str, Callable[[], Built]] = {
    "one-slice": float_block((6, 7), 16, 4),
    "sliced-40x40": float_block((40, 40), 40, 10),
    "hidden-wider-than-a-group": float_block((3, 3), 8, 300),
    "odd-channels": float_block((5, 5), 30, 7),  # no vector loads of the weights
    "efficientnet-b0-block-5b": float_block((14, 14), 672, 28),  # 37,632 weights
    "efficientnet-b0-28x28-block": float_block((28, 28), 240, 10),
    "relu-hard-sigmoid": relu_hard_sigmoid_block,
    "whole-map-average-pool": pooled_block,
    "quantized": quantized_block,
}


@pytest.mark.parametrize(
    "make,precision",
    [pytest.param(m, p, id=f"{n}-{p}") for n, m in CASES.items() for p in PRECISIONS],
)
def test_squeeze_excite_runs_in_one_kernel(opencl_device, make, precision):
    names = check_fused(make(), precision, runs=2)  # the counter is reset between runs
    assert names.count("squeeze_excite") == 1, names


def test_a_mean_read_twice_keeps_its_own_kernel(opencl_device):
    """The MEAN's result is also a model output: it is stored, and no squeeze-excite
    kernel runs."""
    from delegate_runtime.gpu.delegate import GpuSession

    shape = (1, 6, 7, 16)
    b, g, (x,), _ = _graph(shape)
    m = g.tensor("m", (1, 1, 1, 16), F)
    g.op("MEAN", [x, g.const("axes", np.array([1, 2], np.int32))], [m], keep_dims=True)
    e = _one_pixel_conv(g, _one_pixel_conv(g, m, 16, 4, "s", act="RELU"), 4, 16, "e")
    g.output(e)
    g.output(m)
    session = GpuSession(read_model(b.build()), log=io.StringIO())
    names = session.executors[0].kernel_names
    assert "squeeze_excite" not in names, names


def test_large_convolutions_keep_their_gemms(opencl_device):
    """600 -> 300 -> 600 channels: too many weights for one work group (squeeze_excite_max_weights); the
    MEAN and the two convolutions keep kernels of their own."""
    from delegate_runtime.gpu.delegate import GpuSession

    built = float_block((3, 3), 600, 300)()
    session = GpuSession(read_model(built.model), log=io.StringIO())
    names = session.executors[0].kernel_names
    assert "squeeze_excite" not in names, names
    assert sum(n.startswith("gemm") for n in names) == 3, names  # both, and the projection


def _work(names: list[str]) -> list[str]:
    """The kernels but the boundary conversions (fp16, host edges)."""
    return work_kernels(names)


@pytest.mark.parametrize(
    "make,kernel,precision",
    [
        pytest.param(m, k, p, id=f"{n}-{p}")
        for n, (m, k) in DEPTHWISE_CASES.items()
        for p in PRECISIONS
    ],
)
def test_squeeze_excite_computes_its_depthwise_input(opencl_device, make, kernel, precision):
    """The depthwise convolution (its PAD and swish too) runs inside the squeeze-excite
    kernel, which stores its output for the gate's MUL: the block in two launches, its
    outputs against LiteRT's reference kernels."""
    names = _work(check_fused(make(), precision, runs=2))
    assert names[0] == kernel and len(names) == 2, names  # and the projection


@pytest.mark.parametrize("precision", PRECISIONS)
def test_depthwise_squeeze_excite_over_many_slices(opencl_device, precision, monkeypatch):
    """As many slices as a GPU of many compute units gets, forced on this device (one pixel
    per row of items); 56x56x96 as EfficientNet-B0's second block."""
    from delegate_runtime.gpu.opencl import squeeze_excite as se
    from delegate_runtime.gpu.switches import DEFAULTS

    switched(monkeypatch, squeeze_excite_dw_groups_per_cu=10_000)
    many = DEFAULTS.replace(squeeze_excite_dw_groups_per_cu=10_000)
    assert se.depthwise_slicing(56 * 56, 96, 2, many) == (98, 32)
    names = _work(check_fused(depthwise_block((56, 56), 96, 4)(), precision, runs=2))
    assert names[0] == "squeeze_excite_dw4" and len(names) == 2, names


def test_a_wide_depthwise_keeps_its_own_kernel(opencl_device):
    """Past squeeze_excite_dw_max_channels the depthwise keeps its launch and the squeeze-excite reads
    its stored output."""
    from delegate_runtime.gpu.delegate import GpuSession

    built = depthwise_block((6, 6), 520, 8)()
    session = GpuSession(read_model(built.model), log=io.StringIO())
    names = _work(session.executors[0].kernel_names)
    assert names[:2] == ["depthwise3x3_c4", "squeeze_excite"], names


def test_depthwise_slicing_spreads_the_work():
    """The slices fill the device (squeeze_excite_dw_groups_per_cu groups per compute unit), within the
    last group's reading budget and a pixel per row of items; every pixel in one slice."""
    from delegate_runtime.gpu.opencl.squeeze_excite import depthwise_slicing

    assert depthwise_slicing(112 * 112, 32, 132) == (392, 32)  # a pixel per row of 32
    assert depthwise_slicing(14 * 14, 480, 132) == (7, 28)  # a pixel per row of 32
    assert depthwise_slicing(28 * 28, 240, 132) == (25, 32)
    assert depthwise_slicing(56 * 56, 144, 132) == (98, 32)  # 4 groups per unit: 106
    assert depthwise_slicing(112 * 112, 96, 132) == (170, 74)  # the reading budget
    assert depthwise_slicing(7 * 7, 30, 132) == (7, 7)  # a pixel per row of 8 (1 channel)
    assert depthwise_slicing(56 * 56, 96, 2) == (3, 1046)  # two compute units, three blocks
