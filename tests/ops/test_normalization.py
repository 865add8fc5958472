"""L2_NORMALIZATION, LOCAL_RESPONSE_NORMALIZATION and L2_POOL_2D against LiteRT: one one-op
model per configuration; quantized L2_NORMALIZATION bit for bit."""

from __future__ import annotations

import itertools
import zlib

import numpy as np
import pytest

from delegate_runtime.builder import Quant
from delegate_runtime.errors import ModelError
from delegate_runtime.ops.common import output_size
from tests.ops.conftest import BUILTIN, assert_matches_litert, run_litert, run_ours
from tests.ops.oneop import In, one_op, random_array

#: The quantization TFLite requires of a quantized L2_NORMALIZATION's output.
L2_OUT = {np.int8: Quant(1 / 128, 0), np.uint8: Quant(1 / 128, 128)}


def _rng(*key: object) -> np.random.Generator:
    """A generator seeded by the case's parameters (stable across runs and orders)."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def assert_both_refuse(model: bytes, feeds: list[np.ndarray], match: str) -> None:
    """LiteRT refuses the model, and we refuse it with a ModelError naming the op."""
    with pytest.raises((RuntimeError, ValueError)):
        run_litert(model, feeds)
    with pytest.raises(ModelError, match=match):
        run_ours(model, feeds)


# -- L2_NORMALIZATION -----------------------------------------------------------------------

L2_SHAPES = [(6,), (3, 7), (2, 3, 9), (1, 4, 3, 16), (2, 1, 2, 3, 5)]


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("shape", L2_SHAPES, ids=str)
def test_l2_normalization_float(shape: tuple, version: int) -> None:
    x = random_array(_rng("l2", shape), shape) * 3
    x.reshape(-1, shape[-1])[0] = 0  # an all-zero row: divided by the epsilon, not by 0
    model, feeds = one_op("L2_NORMALIZATION", [In(x)], [(shape, np.float32)], version)
    assert_matches_litert(model, feeds)


#: name -> (input shape, input type, input zero point, input scale)
L2_QUANT_CASES = {
    "int8_row": ((2, 5), np.int8, -3, 0.05),
    "int8_4d": ((1, 3, 4, 16), np.int8, 10, 0.1),
    "int8_deep": ((2, 300), np.int8, 0, 0.02),
    "int8_one_channel": ((4, 1), np.int8, -128, 0.5),
    "uint8_row": ((2, 5), np.uint8, 131, 0.05),
    "uint8_4d": ((1, 3, 4, 16), np.uint8, 128, 0.1),
    "uint8_deep": ((2, 300), np.uint8, 90, 0.02),
    "uint8_3d": ((2, 3, 8), np.uint8, 0, 0.3),
    "int8_5d": ((1, 2, 2, 3, 6), np.int8, 4, 0.1),
}


@pytest.mark.parametrize("case", L2_QUANT_CASES, ids=L2_QUANT_CASES.keys())
def test_l2_normalization_quantized(case: str) -> None:
    shape, dtype, zero, scale = L2_QUANT_CASES[case]
    x = random_array(_rng("l2q", case), shape, dtype)
    model, feeds = one_op(
        "L2_NORMALIZATION", [In(x, Quant(scale, zero))], [(shape, dtype, L2_OUT[dtype])], 2
    )
    assert_matches_litert(model, feeds)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
def test_l2_normalization_quantized_tiny_sums(dtype: type) -> None:
    """Rows whose sum of squares is 0, 1, 2 and 4: TFLite's special case and the smallest
    inputs of its fixed-point inverse square root."""
    zero = 5
    x = np.full((4, 3), zero, dtype)
    x[1, 0] += 1
    x[2, :2] -= 1
    x[3, 2] += 2
    model, feeds = one_op(
        "L2_NORMALIZATION", [In(x, Quant(0.1, zero))], [(x.shape, dtype, L2_OUT[dtype])], 2
    )
    assert_matches_litert(model, feeds)


L2_REFUSALS = {
    "fused_relu": (
        (np.float32, (2, 4), None, None),
        {"fused_activation_function": "RELU"},
        "fused activations",
    ),
    "scalar": ((np.float32, (), None, None), {}, "at least one dimension"),
    "int16": ((np.int16, (2, 4), Quant(0.1, 0), Quant(1 / 128, 0)), {}, "int16"),
    "int8_output_scale": ((np.int8, (2, 4), Quant(0.1, 0), Quant(1 / 64, 0)), {}, "1/128"),
    "uint8_output_zero_point": ((np.uint8, (2, 4), Quant(0.1, 0), Quant(1 / 128, 0)), {}, "128"),
}


@pytest.mark.parametrize("case", L2_REFUSALS, ids=L2_REFUSALS.keys())
def test_l2_normalization_refuses(case: str) -> None:
    (dtype, shape, q_in, q_out), options, match = L2_REFUSALS[case]
    x = random_array(_rng("l2bad", case), shape, dtype)
    model, feeds = one_op("L2_NORMALIZATION", [In(x, q_in)], [(shape, dtype, q_out)], 2, **options)
    assert_both_refuse(model, feeds, match=f"L2_NORMALIZATION.*{match}")


# -- LOCAL_RESPONSE_NORMALIZATION -----------------------------------------------------------

#: name -> (input shape, radius, bias, alpha, beta)
LRN_CASES = {
    "alexnet": ((1, 3, 3, 16), 2, 1.0, 1e-4, 0.75),
    "radius_zero": ((2, 2, 2, 5), 0, 1.0, 1.0, 1.0),
    "half_power": ((1, 2, 3, 8), 1, 0.5, 0.3, 0.5),
    "radius_past_depth": ((1, 2, 2, 6), 10, 2.0, 0.1, 1.0),
    "beta_zero": ((1, 1, 2, 4), 3, 1.0, 1.0, 0.0),
    "one_channel": ((1, 3, 2, 1), 2, 1.0, 0.5, 0.75),
}


@pytest.mark.parametrize("case", LRN_CASES, ids=LRN_CASES.keys())
def test_local_response_normalization(case: str) -> None:
    """Against LiteRT's builtin kernel: its reference kernel sums one channel too few
    (c - radius .. c + radius - 1), unlike TensorFlow's op, the builtin kernel and the GPU
    delegate, which sum c - radius .. c + radius."""
    shape, radius, bias, alpha, beta = LRN_CASES[case]
    x = random_array(_rng("lrn", case), shape) * 2
    model, feeds = one_op(
        "LOCAL_RESPONSE_NORMALIZATION",
        [In(x)],
        [(shape, np.float32)],
        radius=radius,
        bias=bias,
        alpha=alpha,
        beta=beta,
    )
    assert_matches_litert(model, feeds, oracle=BUILTIN)


@pytest.mark.parametrize(
    "shape,dtype", [((2, 3, 8), np.float32), ((1, 2, 2, 4), np.int8)], ids=["3d", "int8"]
)
def test_local_response_normalization_refuses(shape: tuple, dtype: type) -> None:
    x = random_array(_rng("lrnbad", shape), shape, dtype)
    q = Quant(0.1, 0) if dtype == np.int8 else None
    model, feeds = one_op(
        "LOCAL_RESPONSE_NORMALIZATION",
        [In(x, q)],
        [(shape, dtype, q)],
        radius=1,
        bias=1.0,
        alpha=1.0,
        beta=0.5,
    )
    assert_both_refuse(model, feeds, match="LOCAL_RESPONSE_NORMALIZATION")


def test_local_response_normalization_refuses_negative_radius() -> None:
    """LiteRT runs it (an empty window); TensorFlow's depth_radius is a count: ours alone."""
    x = np.ones((1, 1, 1, 4), np.float32)
    model, feeds = one_op(
        "LOCAL_RESPONSE_NORMALIZATION", [In(x)], [(x.shape, np.float32)], radius=-1
    )
    with pytest.raises(ModelError, match="radius -1 must not be negative"):
        run_ours(model, feeds)


# -- L2_POOL_2D -----------------------------------------------------------------------------


def l2_pool_model(x_shape, k, stride, padding, act="NONE", dtype=np.float32, quant=None):
    code = ("SAME", "VALID").index(padding)
    oh, ow = (
        output_size(i, kk, s, 1, code) for i, kk, s in zip(x_shape[1:3], k, stride, strict=True)
    )
    return one_op(
        "L2_POOL_2D",
        [In(random_array(_rng("l2pool", x_shape, k, stride, padding, act), x_shape, dtype), quant)],
        [((x_shape[0], oh, ow, x_shape[3]), dtype, quant)],
        padding=padding,
        stride_h=stride[0],
        stride_w=stride[1],
        filter_height=k[0],
        filter_width=k[1],
        fused_activation_function=act,
    )


POOL_CASES = list(
    itertools.product(("SAME", "VALID"), ((2, 2), (3, 3), (2, 3)), ((1, 1), (2, 2), (1, 2)))
)


@pytest.mark.parametrize("padding,k,stride", POOL_CASES)
def test_l2_pool(padding: str, k: tuple, stride: tuple) -> None:
    assert_matches_litert(*l2_pool_model((2, 7, 9, 3), k, stride, padding))


@pytest.mark.parametrize("act", ["RELU", "RELU6", "RELU_N1_TO_1"])
def test_l2_pool_fused_activation(act: str) -> None:
    assert_matches_litert(*l2_pool_model((1, 6, 6, 2), (2, 2), (2, 2), "SAME", act))


def test_l2_pool_filter_larger_than_input() -> None:
    assert_matches_litert(*l2_pool_model((1, 3, 4, 2), (5, 6), (1, 1), "SAME"))


L2_POOL_REFUSALS = {
    "int8": (dict(dtype=np.int8, quant=Quant(0.1, 0)), (2, 2), (1, 1), "int8"),
    "uint8": (dict(dtype=np.uint8, quant=Quant(0.1, 128)), (2, 2), (1, 1), "uint8"),
    "zero_stride": ({}, (2, 2), (0, 1), "stride"),
}


@pytest.mark.parametrize("case", L2_POOL_REFUSALS, ids=L2_POOL_REFUSALS.keys())
def test_l2_pool_refuses(case: str) -> None:
    kw, k, stride, match = L2_POOL_REFUSALS[case]
    x_shape = (1, 4, 4, 2)
    model, feeds = one_op(
        "L2_POOL_2D",
        [
            In(
                random_array(_rng("l2poolbad", case), x_shape, kw.get("dtype", np.float32)),
                kw.get("quant"),
            )
        ],
        [((1, 4, 4, 2), kw.get("dtype", np.float32), kw.get("quant"))],
        padding="SAME",
        stride_h=stride[0],
        stride_w=stride[1],
        filter_height=k[0],
        filter_width=k[1],
    )
    assert_both_refuse(model, feeds, match=f"L2_POOL_2D.*{match}")
