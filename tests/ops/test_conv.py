"""CONV_2D, DEPTHWISE_CONV_2D and TRANSPOSE_CONV against LiteRT, one case per configuration."""

from __future__ import annotations

import itertools
import zlib

import numpy as np
import pytest

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder, Quant
from delegate_runtime.errors import ModelError
from delegate_runtime.interpreter import Interpreter
from delegate_runtime.ops.common import output_size
from tests.ops.conftest import assert_matches_litert, run_litert, run_ours

PADDINGS = ("SAME", "VALID")
#: TANH and SIGN_BIT are accepted and ignored by LiteRT's CPU kernels.
ACTIVATIONS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1", "TANH", "SIGN_BIT")
QUANT_TYPES = {"int8": np.int8, "uint8": np.uint8}


def _rng(*key: object) -> np.random.Generator:
    """A generator seeded by the case's parameters (stable across runs)."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _out_hw(hw, k, stride, dilation, padding):
    code = 0 if padding == "SAME" else 1
    return tuple(output_size(i, kk, stride, dilation, code) for i, kk in zip(hw, k, strict=True))


def conv_model(
    op: str,
    x_shape: tuple[int, ...],
    w: np.ndarray,
    bias: np.ndarray | None,
    out_shape: tuple[int, ...],
    version: int = 1,
    dtype=np.float32,
    quants: tuple[Quant, Quant, Quant, Quant] | None = None,
    **options,
) -> bytes:
    """A one-op CONV_2D or DEPTHWISE_CONV_2D model."""
    qx, qw, qb, qo = quants or (None, None, None, None)
    b = ModelBuilder()
    g = b.main
    x = g.input("x", x_shape, dtype, quant=qx)
    inputs = [x, g.const("w", w, quant=qw), -1]
    if bias is not None:
        inputs[2] = g.const("b", bias, quant=qb)
    y = g.tensor("y", out_shape, dtype, quant=qo)
    g.op(op, inputs, [y], version=version, **options)
    g.output(y)
    return b.build()


def assert_biasless_matches(make_model, bias_size: int, inputs: list[np.ndarray]) -> None:
    """Ours without bias (-1) equals LiteRT with a zero bias (its conv kernels need one)."""
    expected = run_litert(make_model(np.zeros(bias_size, np.float32)), inputs)
    got = run_ours(make_model(None), inputs)
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5 * max(float(np.abs(e).max()), 1.0))


# -- float CONV_2D -------------------------------------------------------------------------

FLOAT_CONV = list(
    itertools.product(PADDINGS, (1, 2), (1, 2), ACTIVATIONS, (True, False), ((3, 3), (1, 1)))
)


@pytest.mark.parametrize("padding,stride,dilation,act,with_bias,k", FLOAT_CONV)
def test_conv2d_float(padding, stride, dilation, act, with_bias, k):
    rng = _rng("conv", padding, stride, dilation, act, with_bias, k)
    hw, cin, cout = (9, 8), 3, 5
    w = rng.standard_normal((cout, *k, cin)).astype(np.float32)
    bias = rng.standard_normal(cout).astype(np.float32)
    oh, ow = _out_hw(hw, k, stride, dilation, padding)

    def make(bias: np.ndarray | None) -> bytes:
        return conv_model(
            "CONV_2D",
            (2, *hw, cin),
            w,
            bias,
            (2, oh, ow, cout),
            padding=padding,
            stride_h=stride,
            stride_w=stride,
            dilation_h_factor=dilation,
            dilation_w_factor=dilation,
            fused_activation_function=act,
        )

    x = rng.standard_normal((2, *hw, cin)).astype(np.float32)
    if with_bias:
        assert_matches_litert(make(bias), [x])
    else:
        assert_biasless_matches(make, cout, [x])


@pytest.mark.parametrize(
    "k,stride,dilation,padding",
    [
        ((2, 3), (1, 2), (1, 1), "SAME"),
        ((3, 1), (2, 1), (2, 1), "VALID"),
        ((5, 5), (3, 3), (1, 1), "SAME"),
    ],
)
def test_conv2d_float_asymmetric(k, stride, dilation, padding):
    rng = _rng("conv-asym", k, stride, dilation, padding)
    hw, cin, cout = (11, 10), 4, 6
    w = rng.standard_normal((cout, *k, cin)).astype(np.float32)
    oh = output_size(hw[0], k[0], stride[0], dilation[0], PADDINGS.index(padding))
    ow = output_size(hw[1], k[1], stride[1], dilation[1], PADDINGS.index(padding))
    model = conv_model(
        "CONV_2D",
        (1, *hw, cin),
        w,
        rng.standard_normal(cout).astype(np.float32),
        (1, oh, ow, cout),
        padding=padding,
        stride_h=stride[0],
        stride_w=stride[1],
        dilation_h_factor=dilation[0],
        dilation_w_factor=dilation[1],
    )
    assert_matches_litert(model, [rng.standard_normal((1, *hw, cin)).astype(np.float32)])


def test_conv2d_float_grouped():
    rng = _rng("conv-grouped")
    w = rng.standard_normal((6, 3, 3, 2)).astype(np.float32)  # 3 groups of 2 -> 2 channels
    bias = rng.standard_normal(6).astype(np.float32)
    model = conv_model(
        "CONV_2D",
        (1, 8, 8, 6),
        w,
        bias,
        (1, 8, 8, 6),
        version=6,
        padding="SAME",
        stride_h=1,
        stride_w=1,
    )
    assert_matches_litert(model, [rng.standard_normal((1, 8, 8, 6)).astype(np.float32)])


# -- float DEPTHWISE_CONV_2D ---------------------------------------------------------------

FLOAT_DW = list(itertools.product(PADDINGS, (1, 2), (1, 2), ACTIVATIONS, (True, False), (1, 2)))


@pytest.mark.parametrize("padding,stride,dilation,act,with_bias,multiplier", FLOAT_DW)
def test_depthwise_float(padding, stride, dilation, act, with_bias, multiplier):
    rng = _rng("dw", padding, stride, dilation, act, with_bias, multiplier)
    hw, cin = (9, 10), 4
    cout = cin * multiplier
    w = rng.standard_normal((1, 3, 3, cout)).astype(np.float32)
    bias = rng.standard_normal(cout).astype(np.float32)
    oh, ow = _out_hw(hw, (3, 3), stride, dilation, padding)

    def make(bias: np.ndarray | None) -> bytes:
        return conv_model(
            "DEPTHWISE_CONV_2D",
            (1, *hw, cin),
            w,
            bias,
            (1, oh, ow, cout),
            version=2 if dilation > 1 else 1,
            padding=padding,
            stride_h=stride,
            stride_w=stride,
            dilation_h_factor=dilation,
            dilation_w_factor=dilation,
            depth_multiplier=multiplier,
            fused_activation_function=act,
        )

    x = rng.standard_normal((1, *hw, cin)).astype(np.float32)
    if with_bias:
        assert_matches_litert(make(bias), [x])
    else:
        assert_biasless_matches(make, cout, [x])


# -- quantized CONV_2D / DEPTHWISE_CONV_2D -------------------------------------------------


def _quant_conv_case(op, qtype, per_channel, padding, stride, act, rng):
    """Random quantized weights, bias, input and sensible output parameters."""
    dtype = QUANT_TYPES[qtype]
    info = np.iinfo(dtype)
    hw, cin = (8, 7), 4
    depthwise = op == "DEPTHWISE_CONV_2D"
    cout = cin * 2 if depthwise else 6
    w_shape = (1, 3, 3, cout) if depthwise else (cout, 3, 3, cin)
    in_scale, in_zp = 0.05, (-3 if dtype == np.int8 else 120)
    if qtype == "int8":
        w = rng.integers(-127, 128, w_shape).astype(np.int8)
        w_scale = rng.uniform(0.002, 0.02, cout) if per_channel else np.array([0.01])
        w_zp = np.zeros(w_scale.size, np.int64)
    else:
        w = rng.integers(0, 256, w_shape).astype(np.uint8)
        w_scale, w_zp = np.array([0.01]), np.array([130])
    bias_scale = in_scale * w_scale.astype(np.float32).astype(np.float64)
    bias = rng.integers(-2000, 2000, cout).astype(np.int32)
    k = 9 if depthwise else 9 * cin
    # about three standard deviations of the real output across the output's range
    out_scale = float(in_scale * w_scale.max() * 74 * 74 * np.sqrt(k) * 3 / 128)
    out_zp = 5 if dtype == np.int8 else 128
    axis = 3 if depthwise else 0
    quants = (
        Quant(in_scale, in_zp),
        Quant(w_scale, w_zp, axis),
        Quant(bias_scale, 0, 0),
        Quant(out_scale, out_zp),
    )
    x = rng.integers(info.min, info.max + 1, (1, *hw, cin)).astype(dtype)
    oh, ow = _out_hw(hw, (3, 3), stride, 1, padding)
    options = dict(padding=padding, stride_h=stride, stride_w=stride, fused_activation_function=act)
    if depthwise:
        options["depth_multiplier"] = 2
    version = 3 if qtype == "int8" else 1
    model = conv_model(op, x.shape, w, bias, (1, oh, ow, cout), version, dtype, quants, **options)
    return model, x


QUANT_CONV = list(
    itertools.product(
        ("CONV_2D", "DEPTHWISE_CONV_2D"),
        (("int8", True), ("int8", False), ("uint8", False)),
        PADDINGS,
        (1, 2),
        ("NONE", "RELU", "RELU6"),
    )
)


@pytest.mark.parametrize("op,qtype_pc,padding,stride,act", QUANT_CONV)
def test_conv_quantized(op, qtype_pc, padding, stride, act):
    qtype, per_channel = qtype_pc
    model, x = _quant_conv_case(
        op, qtype, per_channel, padding, stride, act, _rng(op, qtype_pc, padding, stride, act)
    )
    assert_matches_litert(model, [x])


# -- hybrid CONV_2D / DEPTHWISE_CONV_2D (float input, int8 weights) ---------------------------

HYBRID_CONV = [("CONV_2D", False, 2), ("CONV_2D", True, 5), ("DEPTHWISE_CONV_2D", True, 6)]


@pytest.mark.parametrize("op,per_channel,version", HYBRID_CONV)
@pytest.mark.parametrize("padding", PADDINGS)
def test_conv_hybrid(op, per_channel, version, padding):
    rng = _rng("hybrid", op, per_channel, padding)
    depthwise = op == "DEPTHWISE_CONV_2D"
    cout = 8 if depthwise else 6
    w_shape = (1, 3, 3, cout) if depthwise else (cout, 3, 3, 4)
    w = rng.integers(-127, 128, w_shape).astype(np.int8)
    w_scale = rng.uniform(0.005, 0.02, cout) if per_channel else np.array([0.01])
    quants = (None, Quant(w_scale, 0, 3 if depthwise else 0), None, None)
    options = dict(padding=padding, stride_h=1, stride_w=1, fused_activation_function="RELU")
    if depthwise:
        options["depth_multiplier"] = 2
    oh = 7 if padding == "SAME" else 5
    bias = rng.standard_normal(cout).astype(np.float32)
    model = conv_model(
        op, (2, 7, 7, 4), w, bias, (2, oh, oh, cout), version, np.float32, quants, **options
    )
    x = rng.standard_normal((2, 7, 7, 4)).astype(np.float32) + 0.3
    assert_matches_litert(model, [x])


# -- TRANSPOSE_CONV -------------------------------------------------------------------------


def transpose_conv_model(
    x_shape, w, bias, out_shape, version, dtype=np.float32, quants=None, **options
):
    qx, qw, qb, qo = quants or (None, None, None, None)
    b = ModelBuilder()
    g = b.main
    shape = g.const("output_shape", np.array(out_shape, np.int32))
    wt = g.const("w", w, quant=qw)
    x = g.input("x", x_shape, dtype, quant=qx)
    inputs = [shape, wt, x]
    if bias is not None:
        inputs.append(g.const("b", bias, quant=qb))
    y = g.tensor("y", out_shape, dtype, quant=qo)
    g.op("TRANSPOSE_CONV", inputs, [y], version=version, **options)
    g.output(y)
    return b.build()


FLOAT_TCONV = list(
    itertools.product(
        PADDINGS, (1, 2, 3), ((3, 3), (2, 2), (1, 1)), (True, False), ("NONE", "RELU")
    )
)


@pytest.mark.parametrize("padding,stride,k,with_bias,act", FLOAT_TCONV)
def test_transpose_conv_float(padding, stride, k, with_bias, act):
    rng = _rng("tconv", padding, stride, k, with_bias, act)
    hw, cin, cout = (5, 4), 3, 4
    if padding == "SAME":
        out_hw = (hw[0] * stride, hw[1] * stride)
    else:
        out_hw = tuple((i - 1) * stride + kk for i, kk in zip(hw, k, strict=True))
    w = rng.standard_normal((cout, *k, cin)).astype(np.float32)
    bias = rng.standard_normal(cout).astype(np.float32)
    version = 4 if act != "NONE" else (3 if with_bias else 1)
    options = dict(padding=padding, stride_h=stride, stride_w=stride)
    if act != "NONE":
        options["fused_activation_function"] = act
    model = transpose_conv_model((2, *hw, cin), w, bias, (2, *out_hw, cout), version, **options)
    assert_matches_litert(model, [rng.standard_normal((2, *hw, cin)).astype(np.float32)])


@pytest.mark.parametrize(
    "qtype,padding,stride", list(itertools.product(("int8", "uint8"), PADDINGS, (1, 2)))
)
def test_transpose_conv_quantized(qtype, padding, stride):
    rng = _rng("tconv-q", qtype, padding, stride)
    dtype = QUANT_TYPES[qtype]
    info = np.iinfo(dtype)
    hw, cin, cout, k = (5, 4), 3, 4, (3, 3)
    out_hw = (
        (hw[0] * stride, hw[1] * stride)
        if padding == "SAME"
        else tuple((i - 1) * stride + 3 for i in hw)
    )
    if qtype == "int8":
        w = rng.integers(-127, 128, (cout, *k, cin)).astype(np.int8)
        w_scale, w_zp = rng.uniform(0.002, 0.02, cout), np.zeros(cout, np.int64)
    else:
        w = rng.integers(0, 256, (cout, *k, cin)).astype(np.uint8)
        w_scale, w_zp = np.array([0.01]), np.array([127])
    in_scale, in_zp = 0.05, (2 if qtype == "int8" else 125)
    bias = rng.integers(-1000, 1000, cout).astype(np.int32)
    out_scale = float(in_scale * w_scale.max() * 74 * 74 * np.sqrt(9 * cin) * 3 / 128)
    quants = (
        Quant(in_scale, in_zp),
        Quant(w_scale, w_zp, 0),
        Quant(in_scale * w_scale, 0, 0),
        Quant(out_scale, -4 if qtype == "int8" else 128),
    )
    x = rng.integers(info.min, info.max + 1, (1, *hw, cin)).astype(dtype)
    model = transpose_conv_model(
        x.shape,
        w,
        bias,
        (1, *out_hw, cout),
        3,
        dtype,
        quants,
        padding=padding,
        stride_h=stride,
        stride_w=stride,
    )
    assert_matches_litert(model, [x])


# -- errors -----------------------------------------------------------------------------------


def _run(model: bytes, x: np.ndarray) -> list[np.ndarray]:
    return Interpreter(read_model(model)).invoke([x])


def test_conv2d_int16_is_model_error():
    w = np.ones((2, 1, 1, 3), np.int8)
    q = Quant(0.1, 0)
    model = conv_model(
        "CONV_2D", (1, 4, 4, 3), w, None, (1, 4, 4, 2), 3, np.int16, (q, q, None, q), padding="SAME"
    )
    with pytest.raises(ModelError, match="CONV_2D"):
        _run(model, np.zeros((1, 4, 4, 3), np.int16))


def test_conv2d_int4_version_is_model_error():
    w = np.ones((2, 1, 1, 3), np.int8)
    q = Quant(0.1, 0)
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 4, 4, 3), np.int8, quant=q)
    wt = g.const("w", w, quant=q)
    y = g.tensor("y", (1, 4, 4, 2), np.int8, quant=q)
    g.op("CONV_2D", [x, wt, -1], [y], version=7, padding="SAME", stride_h=1, stride_w=1)
    g.output(y)
    with pytest.raises(ModelError, match="CONV_2D version 7"):
        Interpreter(read_model(b.build()))


def test_depthwise_hybrid_per_tensor_is_model_error():
    w = np.ones((1, 3, 3, 4), np.int8)
    quants = (None, Quant(0.1, 0, 3), None, None)
    model = conv_model(
        "DEPTHWISE_CONV_2D",
        (1, 4, 4, 4),
        w,
        None,
        (1, 4, 4, 4),
        6,
        np.float32,
        quants,
        padding="SAME",
        stride_h=1,
        stride_w=1,
        depth_multiplier=1,
    )
    with pytest.raises(ModelError, match="DEPTHWISE_CONV_2D.*per-channel"):
        _run(model, np.zeros((1, 4, 4, 4), np.float32))


def test_depthwise_filter_mismatch_is_model_error():
    w = np.ones((1, 3, 3, 5), np.float32)
    model = conv_model("DEPTHWISE_CONV_2D", (1, 4, 4, 3), w, None, (1, 4, 4, 5), padding="SAME")
    with pytest.raises(ModelError, match="DEPTHWISE_CONV_2D"):
        _run(model, np.zeros((1, 4, 4, 3), np.float32))
