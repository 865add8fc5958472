"""Fused elementwise chains on the GPU delegate against LiteRT's reference kernels.

Each case is a small model whose elementwise nodes the delegate runs inside the kernel
producing their input (opencl/fusions/); the case checks the output against LiteRT
(BUILTIN_REF) and that the nodes were fused as expected (one kernel covering them).
One case per fusion pattern and precision.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from delegate_runtime import litert, read_model
from delegate_runtime.builder import ModelBuilder, Quant
from delegate_runtime.gpu.opencl.staging_edges import CONVERSIONS
from tests.conftest import require, require_module
from tests.ops.test_gpu_ops import PRECISIONS, TOL, opencl_device, randn

require_module("pyopencl", "pyopencl (the GPU delegate's OpenCL binding)")

__all__ = ["opencl_device"]  # the fixture, re-exported for this module's tests

X = (1, 6, 7, 8)  #: the input of most cases (NHWC)
F = np.float32


@dataclass
class Built:
    model: bytes
    inputs: list[np.ndarray]
    fused: tuple[int, ...]  #: the nodes one kernel must cover, producer first
    tol_abs: float = 0.0  #: extra absolute tolerance (quantized outputs: grid steps)


def _graph(*shapes: tuple[int, ...]):
    b = ModelBuilder()
    g = b.main
    xs = [g.input(f"x{i}", s, F) for i, s in enumerate(shapes)]
    rng = np.random.default_rng(len(shapes) * 7 + sum(map(sum, shapes)))
    inputs = [rng.uniform(-2, 2, s).astype(F) for s in shapes]
    return b, g, xs, inputs


def _same_conv(g, inputs, y, act="NONE"):
    """A CONV_2D of stride 1 and SAME padding from `inputs` (x, weights, bias) into y."""
    g.op(
        "CONV_2D",
        inputs,
        [y],
        padding="SAME",
        stride_h=1,
        stride_w=1,
        fused_activation_function=act,
    )


def _same_depthwise(g, inputs, y, act="NONE"):
    """A DEPTHWISE_CONV_2D of stride 1, SAME padding and multiplier 1 from `inputs` (x,
    weights, bias) into y."""
    g.op(
        "DEPTHWISE_CONV_2D",
        inputs,
        [y],
        padding="SAME",
        stride_h=1,
        stride_w=1,
        depth_multiplier=1,
        fused_activation_function=act,
    )


def _conv(g, x, cin, cout, k=3, act="NONE", name="c"):
    w = g.const(name + "w", randn(name + "w", cout, k, k, cin, scale=1 / np.sqrt(cin * k * k)))
    bias = g.const(name + "b", randn(name + "b", cout))
    y = g.tensor(name + "y", (1, X[1], X[2], cout), F)
    _same_conv(g, [x, w, bias], y, act)
    return y


def _unary(g, op, x, shape, name):
    y = g.tensor(name, shape, F)
    g.op(op, [x], [y])
    return y


def _binary(g, op, a, b_, shape, name, act="NONE"):
    y = g.tensor(name, shape, F)
    if op in ("ADD", "SUB", "MUL"):
        g.op(op, [a, b_], [y], fused_activation_function=act)
    else:
        g.op(op, [a, b_], [y])
    return y


def conv_then_unary(op: str) -> Callable[[], Built]:
    def make() -> Built:
        b, g, (x,), ins = _graph(X)
        y = _unary(g, op, _conv(g, x, 8, 8), X, "u")
        g.output(y)
        return Built(b.build(), ins, (0, 1))

    return make


def conv_swish(first_logistic: bool) -> Callable[[], Built]:
    def make() -> Built:
        b, g, (x,), ins = _graph(X)
        t = _conv(g, x, 8, 8)
        s = _unary(g, "LOGISTIC", t, X, "s")
        y = _binary(g, "MUL", t, s, X, "y") if first_logistic else _binary(g, "MUL", s, t, X, "y")
        g.output(y)
        return Built(b.build(), ins, (0, 1, 2))

    return make


def conv_binary_const(op: str, operand: np.ndarray, conv_first: bool = True) -> Callable[[], Built]:
    def make() -> Built:
        b, g, (x,), ins = _graph(X)
        t = _conv(g, x, 8, 8)
        k = g.const("k", operand)
        y = _binary(g, op, t, k, X, "y", "RELU6") if conv_first else _binary(g, op, k, t, X, "y")
        g.output(y)
        return Built(b.build(), ins, (0, 1))

    return make


def residual_add() -> Built:
    """1x1 conv (the GEMM) + the block's input: MobileNet v2's residual ADD."""
    b, g, (x,), ins = _graph(X)
    t = _conv(g, x, 8, 8, k=1)
    y = _binary(g, "ADD", x, t, X, "y")
    g.output(y)
    return Built(b.build(), ins, (0, 1))


def depthwise_prelu(per_channel: bool) -> Callable[[], Built]:
    def make() -> Built:
        b, g, (x,), ins = _graph(X)
        w = g.const("w", randn("dw", 1, 3, 3, 8))
        t = g.tensor("t", X, F)
        _same_depthwise(g, [x, w, g.const("b", randn("dwb", 8))], t)
        alpha = randn("alpha", 1, 1, 8) if per_channel else np.full((1, 1, 1), 0.25, F)
        y = _binary(g, "PRELU", t, g.const("a", alpha), X, "y")
        g.output(y)
        return Built(b.build(), ins, (0, 1))

    return make


def prelu_then_depthwise1x1() -> Built:
    """PRELU (a binary kernel) -> 1x1 depthwise (MediaPipe's per-channel scale + bias,
    with RELU): a MUL and an ADD per channel and the activation, in PRELU's kernel."""
    b, g, (x,), ins = _graph(X)
    t = _binary(g, "PRELU", x, g.const("a", randn("alpha1", 1, 1, 8)), X, "t")
    y = g.tensor("y", X, F)
    _same_depthwise(
        g, [t, g.const("w", randn("dw1", 1, 1, 1, 8)), g.const("b", randn("dwb1", 8))], y, "RELU"
    )
    g.output(y)
    return Built(b.build(), ins, (0, 1))


def depthwise_swish() -> Built:
    b, g, (x,), ins = _graph(X)
    t = g.tensor("t", X, F)
    _same_depthwise(g, [x, g.const("w", randn("dw2", 1, 3, 3, 8)), g.const("b", randn("b2", 8))], t)
    s = _unary(g, "LOGISTIC", t, X, "s")
    g.output(_binary(g, "MUL", t, s, X, "y"))
    return Built(b.build(), ins, (0, 1, 2))


def fc_chain() -> Built:
    """FULLY_CONNECTED -> ADD per-channel const -> RELU6 -> MUL scalar: three steps."""
    b, g, (x,), ins = _graph((2, 16))
    t = g.tensor("t", (2, 5), F)
    g.op(
        "FULLY_CONNECTED",
        [x, g.const("w", randn("fcw", 5, 16, scale=0.25)), -1],
        [t],
        fused_activation_function="NONE",
    )
    u = _binary(g, "ADD", t, g.const("v", randn("v", 5)), (2, 5), "u", "RELU6")
    y = _binary(g, "MUL", u, g.const("s", np.array([0.5], F)), (2, 5), "y")
    g.output(y)
    return Built(b.build(), ins, (0, 1, 2))


def _pool(g, op, x, shape, size, stride):
    """A SAME-padded square pool of `x` into a new tensor of `shape`."""
    y = g.tensor("t", shape, F)
    g.op(
        op,
        [x],
        [y],
        padding="SAME",
        stride_h=stride,
        stride_w=stride,
        filter_height=size,
        filter_width=size,
        fused_activation_function="NONE",
    )
    return y


def pool_then_sub() -> Built:
    b, g, (x,), ins = _graph(X)
    t = _pool(g, "AVERAGE_POOL_2D", x, (1, 3, 4, 8), 2, 2)
    g.output(_binary(g, "SUB", g.const("k", np.array([1.5], F)), t, (1, 3, 4, 8), "y"))
    return Built(b.build(), ins, (0, 1))


def pool_doubled(op: str, act: str) -> Callable[[], Built]:
    """A pool read only by ADD(t, t) (NASNet's normal cell: two identical pools of one input,
    merged by the converter), with the ADD's fused activation."""

    def make() -> Built:
        b, g, (x,), ins = _graph(X)
        t = _pool(g, op, x, X, 3, 1)
        g.output(_binary(g, "ADD", t, t, X, "y", act=act))
        return Built(b.build(), ins, (0, 1))

    return make


def conv_doubled() -> Built:
    """A 1x1 convolution read only by ADD(t, t)."""
    b, g, (x,), ins = _graph(X)
    t = _conv(g, x, 8, 8, k=1)
    g.output(_binary(g, "ADD", t, t, X, "y"))
    return Built(b.build(), ins, (0, 1))


def add_then_relu() -> Built:
    """A binary op producing: ADD of two inputs, then RELU, then MUL by a runtime vector."""
    b, g, (x, z, v), ins = _graph(X, X, (1, 1, 1, 8))
    t = _binary(g, "ADD", x, z, X, "t")
    u = _unary(g, "RELU", t, X, "u")
    g.output(_binary(g, "MUL", u, v, X, "y"))
    return Built(b.build(), ins, (0, 1, 2))


def squeeze_excite() -> Built:
    """x -> MEAN -> 1x1 conv + swish -> 1x1 conv -> sigmoid -> MUL(x, gate)."""
    b, g, (x,), ins = _graph(X)
    m = g.tensor("m", (1, 1, 1, 8), F)
    g.op("MEAN", [x, g.const("axes", np.array([1, 2], np.int32))], [m], keep_dims=True)

    def fc1x1(inp, cin, cout, name):
        y = g.tensor(name, (1, 1, 1, cout), F)
        w = g.const(name + "w", randn(name, cout, 1, 1, cin, scale=0.5))
        _same_conv(g, [inp, w, g.const(name + "b", randn(name + "b", cout))], y, "NONE")
        return y

    r = fc1x1(m, 8, 2, "r")
    rs = _unary(g, "LOGISTIC", r, (1, 1, 1, 2), "rs")
    r2 = _binary(g, "MUL", r, rs, (1, 1, 1, 2), "r2")
    e = fc1x1(r2, 2, 8, "e")
    gate = _unary(g, "LOGISTIC", e, (1, 1, 1, 8), "gate")
    g.output(_binary(g, "MUL", x, gate, X, "y"))
    return Built(b.build(), ins, (0, 1, 2, 3, 4, 5))  # one kernel (test_gpu_squeeze_excite.py)


def se_gate_into_projection() -> Built:
    """A squeeze-excite block whose gated map feeds a 1x1 projection: the gate MUL runs
    inside the projection's GEMM, which scales its input channels as it loads them."""
    b, g, (x,), ins = _graph(X)
    m = g.tensor("m", (1, 1, 1, 8), F)
    g.op("MEAN", [x, g.const("axes", np.array([1, 2], np.int32))], [m], keep_dims=True)
    r = g.tensor("r", (1, 1, 1, 8), F)
    _same_conv(
        g,
        [m, g.const("rw", randn("rw", 8, 1, 1, 8, scale=0.5)), g.const("rb", randn("rb", 8))],
        r,
        "NONE",
    )
    gate = _unary(g, "LOGISTIC", r, (1, 1, 1, 8), "gate")
    gated = _binary(g, "MUL", x, gate, X, "gated")
    g.output(_conv(g, gated, 8, 6, k=1, name="p"))
    return Built(b.build(), ins, (4, 3))


def pad_into(op: str, stride: int) -> Callable[[], Built]:
    """PAD of H and W, then a VALID convolution: the convolution reads the PAD's input with
    the padding as its own (MediaPipe's explicit padding before strided convolutions)."""

    def make() -> Built:
        b, g, (x,), ins = _graph(X)
        padded = g.tensor("p", (1, X[1] + 2, X[2] + 3, 8), F)
        g.op(
            "PAD",
            [x, g.const("pads", np.array([[0, 0], [1, 1], [2, 1], [0, 0]], np.int32))],
            [padded],
        )
        oh, ow = (X[1] + 2 - 3) // stride + 1, (X[2] + 3 - 3) // stride + 1
        y = g.tensor("y", (1, oh, ow, 8), F)
        common = dict(
            padding="VALID", stride_h=stride, stride_w=stride, fused_activation_function="RELU"
        )
        if op == "CONV_2D":
            w = g.const("w", randn("pw", 8, 3, 3, 8, scale=0.2))
            g.op(op, [padded, w, g.const("b", randn("pb", 8))], [y], **common)
        else:
            w = g.const("w", randn("pdw", 1, 3, 3, 8))
            g.op(op, [padded, w, g.const("b", randn("pdb", 8))], [y], depth_multiplier=1, **common)
        g.output(y)
        return Built(b.build(), ins, (1, 0))

    return make


def _int8_conv(act: str, seed: int):
    """float x -> QUANTIZE -> int8 3x3 CONV_2D (4 channels) -> t: the builder, its graph
    and t."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", X, F)
    q = g.tensor("q", X, np.int8, quant=Quant(0.02, -5))
    g.op("QUANTIZE", [x], [q])
    w = g.const(
        "w",
        np.random.default_rng(seed).integers(-100, 100, (4, 3, 3, 8)).astype(np.int8),
        quant=Quant(0.01, 0),
    )
    bias = g.const("b", np.arange(4, dtype=np.int32) * 10, quant=Quant(0.02 * 0.01, 0))
    t = g.tensor("t", (1, 6, 7, 4), np.int8, quant=Quant(0.05, 3))
    conv = dict(padding="SAME", stride_h=1, stride_w=1, fused_activation_function=act)
    g.op("CONV_2D", [q, w, bias], [t], version=3, **conv)
    return b, g, t


def _dequantized_output(g, y) -> None:
    out = g.tensor("out", (1, 6, 7, 4), F)
    g.op("DEQUANTIZE", [y], [out], version=2)
    g.output(out)


def quantized_conv() -> Built:
    """float -> QUANTIZE -> int8 CONV_2D -> DEQUANTIZE: the conv's kernel snaps its output
    to the int8 grid and writes the float output itself."""
    b, g, y = _int8_conv("RELU", seed=3)
    _dequantized_output(g, y)
    ins = [np.random.default_rng(4).uniform(-2, 2, X).astype(F)]
    return Built(b.build(), ins, (1, 2), tol_abs=2 * 0.05)


def quantized_conv_swish() -> Built:
    """float -> QUANTIZE -> int8 CONV_2D -> int8 LOGISTIC, int8 MUL(conv, sigmoid) ->
    DEQUANTIZE (an int8 EfficientNet's swish): the conv's kernel runs all four, snapping
    the sigmoid to its int8 grid (1/256) before the product."""
    b, g, t = _int8_conv("NONE", seed=5)
    sig = g.tensor("sig", (1, 6, 7, 4), np.int8, quant=Quant(1 / 256, -128))
    g.op("LOGISTIC", [t], [sig], version=2)
    y = g.tensor("y", (1, 6, 7, 4), np.int8, quant=Quant(0.03, -40))
    g.op("MUL", [t, sig], [y], version=2, fused_activation_function="NONE")
    _dequantized_output(g, y)
    ins = [np.random.default_rng(6).uniform(-2, 2, X).astype(F)]
    return Built(b.build(), ins, (1, 2, 3, 4), tol_abs=2 * 0.03)


def _int8_pointwise(g, x, x_scale: float, cin: int, cout: int, name: str, out_q: Quant):
    """An int8 1x1 CONV_2D of x (per-tensor weights) into a new tensor of quantization out_q."""
    w = np.random.default_rng(cin * cout).integers(-90, 90, (cout, 1, 1, cin)).astype(np.int8)
    bias = np.arange(cout, dtype=np.int32) * 7
    y = g.tensor(name, (1, *g_shape(g, x)[1:3], cout), np.int8, quant=out_q)
    g.op(
        "CONV_2D",
        [
            x,
            g.const(name + "w", w, quant=Quant(0.01, 0)),
            g.const(name + "b", bias, quant=Quant(x_scale * 0.01, 0)),
        ],
        [y],
        version=3,
        padding="SAME",
        stride_h=1,
        stride_w=1,
        fused_activation_function="NONE",
    )
    return y


def g_shape(g, t) -> tuple[int, ...]:
    return tuple(g.tensors[t].shape)


def quantized_se_gate_into_projection() -> Built:
    """An int8 squeeze-excite block whose gated map feeds a 1x1 projection: the gate MUL
    (int8 output) runs inside the projection's GEMM, which scales its input channels as it
    loads them and snaps each product to the MUL output's int8 grid."""
    b, g, t = _int8_conv("NONE", seed=7)  # t: int8 (1, 6, 7, 4), Quant(0.05, 3)
    m = g.tensor("m", (1, 1, 1, 4), np.int8, quant=Quant(0.04, 2))
    g.op("MEAN", [t, g.const("axes", np.array([1, 2], np.int32))], [m], version=2, keep_dims=True)
    r = _int8_pointwise(g, m, 0.04, 4, 4, "r", Quant(0.06, -1))
    gate = g.tensor("gate", (1, 1, 1, 4), np.int8, quant=Quant(1 / 256, -128))
    g.op("LOGISTIC", [r], [gate], version=2)
    gated = g.tensor("gated", (1, 6, 7, 4), np.int8, quant=Quant(0.25, 2))  # coarse: the snap shows
    g.op("MUL", [t, gate], [gated], version=2, fused_activation_function="NONE")
    p = _int8_pointwise(g, gated, 0.25, 4, 6, "p", Quant(0.05, -4))
    out = g.tensor("out", (1, 6, 7, 6), F)
    g.op("DEQUANTIZE", [p], [out], version=2)
    g.output(out)
    ins = [np.random.default_rng(8).uniform(-2, 2, X).astype(F)]
    return Built(b.build(), ins, (6, 5, 7), tol_abs=3 * 0.05)


def mean_into_conv(shape: tuple[int, int, int, int], r: int, second: int = 0):
    """MEAN over the pixels (keep_dims) -> 1x1 conv to r channels + RELU [-> 1x1 conv to
    `second` channels]: the first conv's GEMM computes the mean as it loads its input (the
    squeeze-excite kernel takes neither: one conv, or weights past its limit)."""

    def make() -> Built:
        b, g, (x,), ins = _graph(shape)
        n, c = shape[0], shape[-1]
        m = g.tensor("m", (n, 1, 1, c), F)
        g.op("MEAN", [x, g.const("axes", np.array([1, 2], np.int32))], [m], keep_dims=True)
        y = g.tensor("y", (n, 1, 1, r), F)
        w = g.const("mw", randn(f"mw{shape}", r, 1, 1, c, scale=1 / np.sqrt(c)))
        _same_conv(g, [m, w, g.const("mb", randn(f"mb{r}", r))], y, "RELU")
        if second:
            z = g.tensor("z", (n, 1, 1, second), F)
            w2 = g.const("mw2", randn(f"mw2{r}", second, 1, 1, r, scale=1 / np.sqrt(r)))
            _same_conv(g, [y, w2, g.const("mb2", randn(f"mb2{second}", second))], z)
            y = z
        g.output(y)
        return Built(b.build(), ins, (1, 0))

    return make


def affine_into_conv(
    shape: tuple[int, int, int, int], cout: int, act: str, affine_is_output: bool = False
):
    """MUL by a per-channel constant, ADD a per-channel constant with `act` -> 1x1 conv:
    a BatchNormalization and its activation before a convolution (DenseNet, ResNetV2),
    read by the GEMM as it loads its input."""

    def make() -> Built:
        b, g, (x,), ins = _graph(shape)
        c = shape[-1]
        scale = g.const("s", 1 + randn(f"s{shape}", c, scale=0.3))
        shift = g.const("t", randn(f"t{shape}", c, scale=0.5))
        m = _binary(g, "MUL", scale, x, shape, "m")  # the constant first: either order
        a = _binary(g, "ADD", m, shift, shape, "a", act)
        w = g.const("w", randn(f"w{shape}", cout, 1, 1, c, scale=1 / np.sqrt(c)))
        y = g.tensor("y", (*shape[:3], cout), F)
        _same_conv(g, [a, w, g.const("b", randn(f"b{cout}", cout))], y, "RELU6")
        g.output(y)
        if affine_is_output:
            g.output(a)
        return Built(b.build(), ins, (2, 0, 1))

    return make


def mean_into_fully_connected() -> Built:
    """MEAN over the pixels (no keep_dims) -> FULLY_CONNECTED: Keras's global average
    pooling and classifier (MobileNetV2, EfficientNet), one GEMM."""
    b, g, (x,), ins = _graph((1, 7, 7, 32))
    m = g.tensor("m", (1, 32), F)
    g.op("MEAN", [x, g.const("axes", np.array([1, 2], np.int32))], [m], keep_dims=False)
    y = g.tensor("y", (1, 10), F)
    w = g.const("fw", randn("mfw", 10, 32, scale=0.2))
    g.op("FULLY_CONNECTED", [m, w, g.const("fb", randn("mfb", 10))], [y])
    g.output(y)
    return Built(b.build(), ins, (1, 0))


CASES: dict[str, Callable[[], Built]] = {
    "conv-relu": conv_then_unary("RELU"),
    "conv-relu6": conv_then_unary("RELU6"),
    "conv-logistic": conv_then_unary("LOGISTIC"),
    "conv-tanh": conv_then_unary("TANH"),
    "conv-hard-swish": conv_then_unary("HARD_SWISH"),
    "conv-swish": conv_swish(True),
    "conv-swish-mul-operands-swapped": conv_swish(False),
    "conv-add-scalar-relu6": conv_binary_const("ADD", np.array([0.75], F)),
    "conv-mul-channel-vector": conv_binary_const("MUL", randn("mv", 8)),
    "conv-sub-same-shape-const": conv_binary_const("SUB", randn("sub", *X)),
    "const-minus-conv": conv_binary_const("SUB", randn("rsub", 8), conv_first=False),
    "gemm-residual-add": residual_add,
    "depthwise-prelu-channel": depthwise_prelu(True),
    "depthwise-prelu-scalar": depthwise_prelu(False),
    "depthwise3x3-swish": depthwise_swish,
    "prelu-depthwise1x1-relu": prelu_then_depthwise1x1,
    "fc-add-relu6-mul": fc_chain,
    "pool-rsub-scalar": pool_then_sub,
    "average-pool-doubled": pool_doubled("AVERAGE_POOL_2D", "NONE"),
    "max-pool-doubled-relu6": pool_doubled("MAX_POOL_2D", "RELU6"),
    "conv1x1-doubled": conv_doubled,
    "add-relu-mul-runtime-vector": add_then_relu,
    "squeeze-excite": squeeze_excite,
    "squeeze-excite-gate-into-projection": se_gate_into_projection,
    "quantize-conv-dequantize": quantized_conv,
    "quantized-conv-swish": quantized_conv_swish,
    "quantized-se-gate-into-projection": quantized_se_gate_into_projection,
    # MobileNetV3's head and its squeeze-excite blocks past squeeze_excite_max_weights
    "mean-into-1x1": mean_into_conv((1, 6, 7, 8), 6),
    "mean-into-1x1-batch2-odd-channels": mean_into_conv((2, 5, 3, 7), 5),
    "mean-into-1x1-large-squeeze-excite": mean_into_conv((1, 7, 7, 256), 128, 256),
    "mean-into-1x1-batch2-143-pixels": mean_into_conv((2, 13, 11, 96), 24),
    "mean-into-1x1-14x14-squeeze-excite": mean_into_conv((1, 14, 14, 672), 168, 672),
    "mean-into-fully-connected": mean_into_fully_connected,
    "batchnorm-relu-into-1x1": affine_into_conv((1, 6, 7, 8), 12, "RELU"),
    "batchnorm-relu6-into-1x1-batch2": affine_into_conv((2, 5, 3, 16), 8, "RELU6"),
    "batchnorm-into-1x1-odd-channels": affine_into_conv((1, 4, 5, 7), 5, "NONE"),
    "batchnorm-relu-into-1x1-split-k": affine_into_conv((1, 3, 3, 512), 8, "RELU"),
    "pad-into-conv": pad_into("CONV_2D", 1),
    "pad-into-depthwise-stride2": pad_into("DEPTHWISE_CONV_2D", 2),
}


@pytest.mark.parametrize(
    "make,precision",
    [pytest.param(m, p, id=f"{n}-{p}") for n, m in CASES.items() for p in PRECISIONS],
)
def test_fused_chain_matches_litert(opencl_device, make, precision):
    check_fused(make(), precision)


def check_fused(built: Built, precision: str, runs: int = 1) -> list[str]:
    """Run `built` on the delegate: every node delegated, the nodes `built.fused` in one
    kernel, and its outputs against LiteRT's reference kernels in each of `runs` invokes
    (kernels with counters reset them for the next). Returns the partition's kernel names."""
    session = check_against_litert(built.model, built.inputs, precision, runs, built.tol_abs)
    fused = session.fused_kernels()
    assert fused.get(built.fused[0]) == built.fused, fused
    return session.executors[0].kernel_names


def work_kernels(names: list[str]) -> list[str]:
    """Kernel names but the conversions at a partition's edges (fp16, or host edges on
    NVIDIA: opencl/host_edges.py)."""
    return [n for n in names if n not in CONVERSIONS]


def check_against_litert(
    model: bytes, inputs: list[np.ndarray], precision: str, runs: int = 1, tol_abs: float = 0.0
):
    """A delegate session of `model`: every node delegated, its outputs against LiteRT's
    reference kernels in each of `runs` invokes (`tol_abs`: extra absolute tolerance)."""
    from delegate_runtime.gpu.delegate import GpuSession

    require(litert.available(), "ai-edge-litert (the LiteRT oracle)")
    want = litert.run(model, inputs, reference=True)
    session = GpuSession(read_model(model), precision=precision, log=io.StringIO())
    d = session.delegation
    assert d.delegated_nodes == d.total_nodes, d.to_dict()
    for _ in range(runs):
        for g_, w in zip(session.invoke(inputs), want, strict=True):
            scale = max(float(np.abs(w).max()), 1.0)
            tol = TOL[precision] * scale + tol_abs
            np.testing.assert_allclose(g_, w, rtol=TOL[precision], atol=tol)
    return session


def test_squeeze_excite_runs_in_two_kernels(opencl_device):
    """MEAN, 1x1 conv + swish, 1x1 conv + sigmoid in one launch, then the MUL: two
    launches for seven nodes."""
    from delegate_runtime.gpu.delegate import GpuSession

    session = GpuSession(read_model(squeeze_excite().model), log=io.StringIO())
    assert session.fused_kernels() == {0: (0, 1, 2, 3, 4, 5)}
    assert len(work_kernels(session.executors[0].kernel_names)) == 2


def test_a_tensor_read_twice_is_not_absorbed(opencl_device):
    """conv -> RELU, and the conv's output is also a model output: no fusion."""
    from delegate_runtime.gpu.delegate import GpuSession

    b, g, (x,), ins = _graph(X)
    t = _conv(g, x, 8, 8)
    g.output(_unary(g, "RELU", t, X, "u"))
    g.output(t)
    require(litert.available(), "ai-edge-litert (the LiteRT oracle)")
    session = GpuSession(read_model(b.build()), log=io.StringIO())
    assert session.fused_kernels() == {}
    want = litert.run(b.build(), ins, reference=True)
    for g_, w in zip(session.invoke(ins), want, strict=True):
        np.testing.assert_allclose(g_, w, rtol=1e-4, atol=1e-4)


def test_a_batchnorm_read_twice_stays_its_own_kernel(opencl_device):
    """The ADD's output read by the conv and also a model output: nothing absorbed before
    the conv (the MUL and ADD still run as one kernel of their own)."""
    from delegate_runtime.gpu.delegate import GpuSession

    built = affine_into_conv((1, 6, 7, 8), 12, "RELU", affine_is_output=True)()
    session = GpuSession(read_model(built.model), log=io.StringIO())
    assert session.fused_kernels() == {0: (0, 1)}
    assert len(work_kernels(session.executors[0].kernel_names)) == 2


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("hw", [(12, 12), (40, 40)], ids=["one-slice", "sliced"])
def test_mean_over_a_large_map_matches_litert(opencl_device, precision, hw):
    """MEAN over many pixels: work groups share each channel's sum (mean_axis_wide); over
    40 x 40 pixels several groups each sum a slice and the last adds their sums."""
    from delegate_runtime.gpu.delegate import GpuSession

    require(litert.available(), "ai-edge-litert (the LiteRT oracle)")
    b, g, (x,), ins = _graph((1, *hw, 40))
    m = g.tensor("m", (1, 1, 1, 40), F)
    g.op("MEAN", [x, g.const("axes", np.array([1, 2], np.int32))], [m], keep_dims=True)
    g.output(m)
    session = GpuSession(read_model(b.build()), precision=precision, log=io.StringIO())
    names = session.executors[0].kernel_names
    assert work_kernels(names) == ["mean_axis_wide"]
    want = litert.run(b.build(), ins, reference=True)[0]
    for _ in range(3):  # the counters are reset for the next run
        np.testing.assert_allclose(session.invoke(ins)[0], want, rtol=TOL[precision], atol=1e-3)
