"""CONV_3D and CONV_3D_TRANSPOSE against LiteRT's reference kernels, one case per
configuration (padding, strides, dilations, fused activation, bias)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder
from delegate_runtime.errors import ModelError
from delegate_runtime.interpreter import Interpreter
from delegate_runtime.ops.common import output_size
from tests.ops.conftest import assert_matches_litert, litert_interpreter

#: TANH and SIGN_BIT are accepted and ignored by LiteRT's CPU kernels (clamps only).
ACTIVATIONS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1", "TANH")
PADDING_CODES = {"SAME": 0, "VALID": 1}


def _rng(*key: object) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _out_dhw(dhw, k, strides, dilations, padding) -> tuple[int, ...]:
    code = PADDING_CODES[padding]
    return tuple(
        output_size(i, kk, s, d, code)
        for i, kk, s, d in zip(dhw, k, strides, dilations, strict=True)
    )


def _options(
    padding: str = "SAME", strides=(1, 1, 1), dilations=(1, 1, 1), act: str = "NONE"
) -> dict:
    """Conv3DOptions (its strides default to 0 in the schema: always written)."""
    return dict(
        padding=padding,
        stride_d=strides[0],
        stride_h=strides[1],
        stride_w=strides[2],
        dilation_d_factor=dilations[0],
        dilation_h_factor=dilations[1],
        dilation_w_factor=dilations[2],
        fused_activation_function=act,
    )


def conv3d_model(x_shape, w, bias, out_shape, **options) -> bytes:
    b = ModelBuilder()
    g = b.main
    x = g.input("x", x_shape)
    ins = [x, g.const("w", w)]
    if bias is not None:
        ins.append(g.const("b", bias))
    y = g.tensor("y", out_shape)
    g.op("CONV_3D", ins, [y], **options)
    g.output(y)
    return b.build()


CONV3D_CASES = {
    "same_s1": ("SAME", (1, 1, 1), (1, 1, 1), "NONE", True),
    "valid_s1": ("VALID", (1, 1, 1), (1, 1, 1), "NONE", True),
    "same_s2": ("SAME", (2, 2, 2), (1, 1, 1), "RELU", True),
    "valid_s2": ("VALID", (2, 2, 2), (1, 1, 1), "RELU6", True),
    "same_mixed_strides": ("SAME", (1, 2, 3), (1, 1, 1), "NONE", False),
    "valid_mixed_strides": ("VALID", (2, 1, 2), (1, 1, 1), "RELU_N1_TO_1", True),
    "same_dilated": ("SAME", (1, 1, 1), (2, 2, 2), "NONE", True),
    "valid_dilated_mixed": ("VALID", (1, 1, 1), (1, 2, 2), "RELU", False),
    "same_strided_dilated": ("SAME", (2, 1, 1), (1, 1, 2), "NONE", True),
    "tanh_ignored": ("SAME", (1, 1, 1), (1, 1, 1), "TANH", True),
    "no_bias": ("VALID", (1, 1, 1), (1, 1, 1), "NONE", False),
}


@pytest.mark.parametrize("kernel", [(3, 3, 3), (2, 3, 1), (1, 1, 1)], ids=["k333", "k231", "k111"])
@pytest.mark.parametrize("case", CONV3D_CASES.values(), ids=CONV3D_CASES.keys())
def test_conv3d_float(case, kernel) -> None:
    padding, strides, dilations, act, with_bias = case
    rng = _rng("conv3d", case, kernel)
    dhw, cin, cout = (5, 6, 7), 3, 4
    w = rng.standard_normal((*kernel, cin, cout)).astype(np.float32)
    bias = rng.standard_normal(cout).astype(np.float32) if with_bias else None
    out = (2, *_out_dhw(dhw, kernel, strides, dilations, padding), cout)
    model = conv3d_model((2, *dhw, cin), w, bias, out, **_options(padding, strides, dilations, act))
    x = rng.standard_normal((2, *dhw, cin)).astype(np.float32)
    assert_matches_litert(model, [x])


def conv3d_transpose_model(out_shape, w, x_shape, bias, shape_input: bool, **options) -> bytes:
    """CONV_3D_TRANSPOSE with its output shape as a constant or as a runtime input."""
    b = ModelBuilder()
    g = b.main
    shape = np.array(out_shape, np.int32)
    s = g.input("shape", (5,), np.int32) if shape_input else g.const("shape", shape)
    x = g.input("x", x_shape)
    ins = [s, g.const("w", w), x]
    if bias is not None:
        ins.append(g.const("b", bias))
    y = g.tensor("y", out_shape)
    g.op("CONV_3D_TRANSPOSE", ins, [y], **options)
    g.output(y)
    return b.build()


TRANSPOSE_CASES = {
    "same_s1": ("SAME", (1, 1, 1), (1, 1, 1), "NONE", True, (4, 5, 6)),
    "valid_s1": ("VALID", (1, 1, 1), (1, 1, 1), "NONE", True, (4, 5, 6)),
    "same_s2": ("SAME", (2, 2, 2), (1, 1, 1), "RELU", True, (6, 7, 8)),
    "valid_s2": ("VALID", (2, 2, 2), (1, 1, 1), "NONE", True, (7, 7, 9)),
    "same_mixed_strides": ("SAME", (1, 2, 3), (1, 1, 1), "RELU6", False, (4, 6, 9)),
    "valid_mixed_strides": ("VALID", (2, 1, 2), (1, 1, 1), "NONE", True, (5, 5, 7)),
    "same_dilated": ("SAME", (1, 1, 1), (2, 1, 2), "NONE", True, (5, 5, 6)),
    "valid_dilated": ("VALID", (1, 1, 1), (1, 2, 2), "RELU_N1_TO_1", True, (7, 8, 9)),
    "no_bias": ("SAME", (2, 2, 1), (1, 1, 1), "NONE", False, (6, 6, 5)),
}


@pytest.mark.parametrize("shape_input", [False, True], ids=["const_shape", "runtime_shape"])
@pytest.mark.parametrize("case", TRANSPOSE_CASES.values(), ids=TRANSPOSE_CASES.keys())
def test_conv3d_transpose_float(case, shape_input: bool) -> None:
    padding, strides, dilations, act, with_bias, out_dhw = case
    rng = _rng("conv3d_transpose", case)
    kernel, cin, cout = (3, 2, 3), 3, 2
    in_dhw = _out_dhw(out_dhw, kernel, strides, dilations, padding)
    w = rng.standard_normal((*kernel, cout, cin)).astype(np.float32)
    bias = rng.standard_normal(cout).astype(np.float32) if with_bias else None
    out_shape = (2, *out_dhw, cout)
    x_shape = (2, *in_dhw, cin)
    options = _options(padding, strides, dilations, act)
    model = conv3d_transpose_model(out_shape, w, x_shape, bias, shape_input, **options)
    x = rng.standard_normal(x_shape).astype(np.float32)
    feeds = [np.array(out_shape, np.int32), x] if shape_input else [x]
    assert_matches_litert(model, feeds)


def _refused_by_litert(model: bytes) -> None:
    """LiteRT refuses `model` (at allocation or at its first invoke)."""
    with pytest.raises((ValueError, RuntimeError)):
        litert_interpreter(model).invoke()


def test_conv3d_channel_mismatch_is_refused() -> None:
    """A filter whose input channels differ from the input's: LiteRT refuses at Prepare."""
    w = np.ones((2, 2, 2, 4, 3), np.float32)
    model = conv3d_model((1, 4, 4, 4, 3), w, None, (1, 4, 4, 4, 3), **_options())
    _refused_by_litert(model)
    x = np.ones((1, 4, 4, 4, 3), np.float32)
    with pytest.raises(ModelError, match=r"CONV_3D.*does not fit filter"):
        Interpreter(read_model(model)).invoke([x])


def test_conv3d_rank4_input_is_refused() -> None:
    w = np.ones((2, 2, 2, 3, 3), np.float32)
    model = conv3d_model((1, 4, 4, 3), w, None, (1, 4, 4, 4, 3), **_options())
    _refused_by_litert(model)
    with pytest.raises(ModelError, match=r"CONV_3D.*rank 5"):
        Interpreter(read_model(model)).invoke([np.ones((1, 4, 4, 3), np.float32)])


def test_conv3d_zero_stride_is_refused() -> None:
    w = np.ones((2, 2, 2, 3, 3), np.float32)
    options = _options(strides=(0, 1, 1))
    model = conv3d_model((1, 4, 4, 4, 3), w, None, (1, 4, 4, 4, 3), **options)
    _refused_by_litert(model)
    with pytest.raises(ModelError, match=r"CONV_3D.*must be positive"):
        Interpreter(read_model(model)).invoke([np.ones((1, 4, 4, 4, 3), np.float32)])


def test_conv3d_transpose_inconsistent_output_shape_is_refused() -> None:
    """An output shape whose convolution does not give the input's size: refused."""
    w = np.ones((3, 3, 3, 2, 3), np.float32)
    model = conv3d_transpose_model((1, 9, 4, 4, 2), w, (1, 4, 4, 4, 3), None, False, **_options())
    _refused_by_litert(model)
    with pytest.raises(ModelError, match=r"CONV_3D_TRANSPOSE.*not the input's"):
        Interpreter(read_model(model)).invoke([np.ones((1, 4, 4, 4, 3), np.float32)])


def test_conv3d_transpose_negative_output_shape_is_refused() -> None:
    w = np.ones((1, 1, 1, 2, 3), np.float32)
    model = conv3d_transpose_model((1, 4, 4, 4, 2), w, (1, 4, 4, 4, 3), None, True, **_options())
    x = np.ones((1, 4, 4, 4, 3), np.float32)
    bad = np.array([1, -4, 4, 4, 2], np.int32)
    ref = litert_interpreter(model)
    ref.set_tensor(ref.get_input_details()[0]["index"], bad)
    ref.set_tensor(ref.get_input_details()[1]["index"], x)
    with pytest.raises(RuntimeError):
        ref.invoke()
    with pytest.raises(ModelError, match=r"CONV_3D_TRANSPOSE.*negative"):
        Interpreter(read_model(model)).invoke([bad, x])


def test_conv3d_int8_is_refused() -> None:
    """LiteRT's CONV_3D is float32 only."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 2, 2, 2, 1), np.int8, quant=(0.1, 0))
    w = g.const("w", np.ones((1, 1, 1, 1, 1), np.int8), quant=(0.1, 0))
    y = g.tensor("y", (1, 2, 2, 2, 1), np.int8, quant=(0.1, 0))
    g.op("CONV_3D", [x, w], [y], **_options())
    g.output(y)
    model = b.build()
    _refused_by_litert(model)
    with pytest.raises(ModelError, match=r"CONV_3D.*float32"):
        Interpreter(read_model(model)).invoke([np.ones((1, 2, 2, 2, 1), np.int8)])
