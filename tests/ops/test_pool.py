"""AVERAGE_POOL_2D and MAX_POOL_2D against LiteRT, one case per configuration."""

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
from tests.ops.conftest import assert_matches_litert

OPS = ("AVERAGE_POOL_2D", "MAX_POOL_2D")
PADDINGS = ("SAME", "VALID")
ACTIVATIONS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")
QUANT = {
    "int8": (np.int8, 0.05, -7, 2),
    "uint8": (np.uint8, 0.05, 120, 1),
    "int16": (np.int16, 0.001, 0, 3),
}


def _rng(*key: object) -> np.random.Generator:
    """A generator seeded by the case's parameters (stable across runs)."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def pool_model(op, x_shape, k, stride, padding, act, dtype=np.float32, quant=None, version=1):
    """A one-op pooling model; the output keeps the input's quantization."""
    code = PADDINGS.index(padding)
    oh, ow = (
        output_size(i, kk, s, 1, code) for i, kk, s in zip(x_shape[1:3], k, stride, strict=True)
    )
    b = ModelBuilder()
    g = b.main
    x = g.input("x", x_shape, dtype, quant=quant)
    y = g.tensor("y", (x_shape[0], oh, ow, x_shape[3]), dtype, quant=quant)
    g.op(
        op,
        [x],
        [y],
        version=version,
        padding=padding,
        stride_h=stride[0],
        stride_w=stride[1],
        filter_height=k[0],
        filter_width=k[1],
        fused_activation_function=act,
    )
    g.output(y)
    return b.build()


FLOAT_CASES = list(
    itertools.product(
        OPS, PADDINGS, ((2, 2), (3, 3), (2, 3)), ((1, 1), (2, 2), (1, 2)), ACTIVATIONS
    )
)


@pytest.mark.parametrize("op,padding,k,stride,act", FLOAT_CASES)
def test_pool_float(op, padding, k, stride, act):
    rng = _rng(op, padding, k, stride, act)
    x = rng.standard_normal((2, 7, 9, 3)).astype(np.float32) * 2
    assert_matches_litert(pool_model(op, x.shape, k, stride, padding, act), [x])


QUANT_CASES = list(
    itertools.product(
        OPS, tuple(QUANT), PADDINGS, ((2, 2), (3, 3)), ((1, 1), (2, 2)), ("NONE", "RELU6")
    )
)


@pytest.mark.parametrize("op,qtype,padding,k,stride,act", QUANT_CASES)
def test_pool_quantized(op, qtype, padding, k, stride, act):
    dtype, scale, zp, version = QUANT[qtype]
    info = np.iinfo(dtype)
    x = _rng(op, qtype, padding, k, stride, act).integers(info.min, info.max + 1, (1, 8, 7, 5))
    x = x.astype(dtype)
    model = pool_model(op, x.shape, k, stride, padding, act, dtype, Quant(scale, zp), version)
    assert_matches_litert(model, [x])


def test_average_pool_rounds_half_away_from_zero():
    # windows summing to -3 and +3 over 2 values: -1.5 -> -2 and 1.5 -> 2
    x = np.array([-1, -2, 1, 2], np.int8).reshape(1, 1, 4, 1)
    model = pool_model(
        "AVERAGE_POOL_2D", x.shape, (1, 2), (1, 2), "VALID", "NONE", np.int8, Quant(0.1, 0), 2
    )
    got = assert_matches_litert(model, [x])
    np.testing.assert_array_equal(got[0].reshape(-1), [-2, 2])


def test_pool_float16_is_model_error():
    model = pool_model("MAX_POOL_2D", (1, 4, 4, 2), (2, 2), (2, 2), "VALID", "NONE", np.float16)
    with pytest.raises(ModelError, match="MAX_POOL_2D"):
        Interpreter(read_model(model)).invoke([np.zeros((1, 4, 4, 2), np.float16)])


def test_pool_int16_version_4_is_model_error():
    q = Quant(0.1, 0)
    model = pool_model(
        "AVERAGE_POOL_2D", (1, 4, 4, 2), (2, 2), (2, 2), "VALID", "NONE", np.int8, q, 4
    )
    with pytest.raises(ModelError, match="AVERAGE_POOL_2D version 4"):
        Interpreter(read_model(model))
