"""FLOOR, CEIL, ROUND, SIGN, ATAN2, BITWISE_XOR, RIGHT_SHIFT, BITCAST, RANK, BROADCAST_ARGS
and FAKE_QUANT against LiteRT's reference kernels: one one-op model per configuration."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from delegate_runtime.errors import ModelError
from tests.ops.conftest import assert_matches_litert, run_litert, run_ours
from tests.ops.oneop import Const, In, one_op, random_array


def _rng(*key: object) -> np.random.Generator:
    """A generator seeded by the case's parameters (stable across runs and orders)."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def assert_both_refuse(model: bytes, feeds: list[np.ndarray], match: str) -> None:
    """LiteRT refuses the model, and we refuse it with a ModelError naming the op."""
    with pytest.raises((RuntimeError, ValueError)):
        run_litert(model, feeds)
    with pytest.raises(ModelError, match=match):
        run_ours(model, feeds)


#: Ties, signed zeros and large values.
TIES = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, -0.0, 0.0, 1e9 + 0.5, -7.5e6], np.float32)
#: Values assert_allclose cannot scale a tolerance by: compared bit for bit.
NON_FINITE = np.array([np.inf, -np.inf, np.nan, -np.nan, -0.0, 0.0, 1.5], np.float32)


def assert_same_bits(model: bytes, feeds: list[np.ndarray]) -> None:
    """Our outputs equal LiteRT's bit for bit (NaN payloads and signed zeros included)."""
    (expected,), (got,) = run_litert(model, feeds), run_ours(model, feeds)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got.view(np.uint8), expected.view(np.uint8))


# -- FLOOR, CEIL, ROUND, SIGN ---------------------------------------------------------------


@pytest.mark.parametrize("op", ["FLOOR", "CEIL", "ROUND"])
@pytest.mark.parametrize("values", ["ties", "random_3d"])
def test_rounding(op: str, values: str) -> None:
    x = TIES if values == "ties" else random_array(_rng(op), (2, 3, 4)) * 4
    assert_matches_litert(*one_op(op, [In(x)], [(x.shape, np.float32)]))


@pytest.mark.parametrize("op", ["FLOOR", "CEIL", "ROUND", "SIGN"])
def test_non_finite_values(op: str) -> None:
    assert_same_bits(*one_op(op, [In(NON_FINITE)], [(NON_FINITE.shape, np.float32)]))


def test_round_ties_go_to_even() -> None:
    """TFLite rounds half to even (2.5 -> 2), not away from zero."""
    x = np.array([0.5, 1.5, 2.5, 3.5, -2.5, -3.5], np.float32)
    out = assert_matches_litert(*one_op("ROUND", [In(x)], [(x.shape, np.float32)]))[0]
    np.testing.assert_array_equal(out, [0, 2, 2, 4, -2, -4])


@pytest.mark.parametrize("op", ["FLOOR", "CEIL", "ROUND"])
def test_rounding_refuses_int32(op: str) -> None:
    x = np.arange(4, dtype=np.int32)
    assert_both_refuse(*one_op(op, [In(x)], [(x.shape, np.int32)]), match=op)


SIGN_CASES = {
    "float32_ties": (TIES, 1),
    "float32_random": (random_array(_rng("sign"), (3, 5)), 1),
    "float64": (np.array([-2.5, 0.0, -0.0, 3.0, np.nan, -np.inf], np.float64), 1),
    "int32": (np.array([[-7, 0, 5], [2**31 - 1, -(2**31), 1]], np.int32), 2),
}


@pytest.mark.parametrize("case", SIGN_CASES, ids=SIGN_CASES.keys())
def test_sign(case: str) -> None:
    x, version = SIGN_CASES[case]
    assert_same_bits(*one_op("SIGN", [In(x)], [(x.shape, x.dtype)], version=version))


def test_sign_refuses_int8() -> None:
    x = np.array([-3, 0, 4], np.int8)
    assert_both_refuse(*one_op("SIGN", [In(x)], [(x.shape, np.int8)], version=2), match="SIGN")


# -- ATAN2 ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_atan2(dtype: type) -> None:
    rng = _rng("atan2", dtype)
    y = (rng.standard_normal((2, 3, 4)) * 3).astype(dtype)
    x = (rng.standard_normal((2, 3, 4)) * 3).astype(dtype)
    y[0, 0, :2], x[0, 0, 1:3] = 0, 0  # the axes and the origin
    x[1, 1, :] = -0.0
    assert_matches_litert(*one_op("ATAN2", [In(y), In(x)], [(y.shape, dtype)]))


def test_atan2_refuses_other_rank() -> None:
    y, x = np.ones((2, 3), np.float32), np.ones((3,), np.float32)
    assert_both_refuse(*one_op("ATAN2", [In(y), In(x)], [((2, 3), np.float32)]), match="ATAN2")


def test_atan2_refuses_other_shape() -> None:
    """LiteRT checks only the rank and then reads x out of bounds: no oracle, ours alone."""
    y, x = np.ones((2, 3), np.float32), np.ones((1, 3), np.float32)
    with pytest.raises(ModelError, match="ATAN2.*one shape"):
        run_ours(*one_op("ATAN2", [In(y), In(x)], [((2, 3), np.float32)]))


# -- BITWISE_XOR, RIGHT_SHIFT ---------------------------------------------------------------

INT_TYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32]
SHAPE_PAIRS = {
    "same": ((2, 3, 4), (2, 3, 4)),
    "vector": ((2, 3, 4), (4,)),
    "scalar": ((3, 5), ()),
    "both_ways": ((2, 1, 4), (1, 3, 1)),
    "5d": ((2, 1, 3, 1, 4), (1, 2, 1, 3, 4)),
}


@pytest.mark.parametrize("shapes", SHAPE_PAIRS, ids=SHAPE_PAIRS.keys())
@pytest.mark.parametrize("dtype", INT_TYPES, ids=[np.dtype(t).name for t in INT_TYPES])
def test_bitwise_xor(dtype: type, shapes: str) -> None:
    sa, sb = SHAPE_PAIRS[shapes]
    rng = _rng("xor", dtype, shapes)
    a, b = random_array(rng, sa, dtype), random_array(rng, sb, dtype)
    out_shape = np.broadcast_shapes(sa, sb)
    assert_matches_litert(*one_op("BITWISE_XOR", [In(a), In(b)], [(out_shape, dtype)]))


@pytest.mark.parametrize("shapes", SHAPE_PAIRS, ids=SHAPE_PAIRS.keys())
@pytest.mark.parametrize("dtype", INT_TYPES, ids=[np.dtype(t).name for t in INT_TYPES])
def test_right_shift(dtype: type, shapes: str) -> None:
    """Shift amounts run past the bit width (clamped to bits - 1) and, for signed types,
    below zero (clamped to 0); negative values shift arithmetically."""
    sa, sb = SHAPE_PAIRS[shapes]
    rng = _rng("shift", dtype, shapes)
    bits = np.dtype(dtype).itemsize * 8
    low = -3 if np.dtype(dtype).kind == "i" else 0
    a = random_array(rng, sa, dtype)
    b = rng.integers(low, bits + 4, sb).astype(dtype)
    out_shape = np.broadcast_shapes(sa, sb)
    assert_matches_litert(*one_op("RIGHT_SHIFT", [In(a), In(b)], [(out_shape, dtype)]))


@pytest.mark.parametrize("op", ["BITWISE_XOR", "RIGHT_SHIFT"])
@pytest.mark.parametrize("dtype", [np.float32, np.int64], ids=["float32", "int64"])
def test_bitwise_refuses_type(op: str, dtype: type) -> None:
    a = np.ones((2, 3), dtype)
    assert_both_refuse(*one_op(op, [In(a), In(a)], [((2, 3), dtype)]), match=op)


def test_right_shift_refuses_mixed_types() -> None:
    a, b = np.ones((3,), np.int32), np.ones((3,), np.int8)
    assert_both_refuse(
        *one_op("RIGHT_SHIFT", [In(a), In(b)], [((3,), np.int32)]), match="RIGHT_SHIFT"
    )


# -- BITCAST, RANK, BROADCAST_ARGS ----------------------------------------------------------

BITCAST_CASES = {
    "float32_to_uint8": ((2, 3), np.float32, (2, 3, 4), np.uint8),
    "float32_to_int16": ((3,), np.float32, (3, 2), np.int16),
    "uint8_to_int32": ((2, 4), np.uint8, (2,), np.int32),
    "int8_to_float32": ((3, 2, 4), np.int8, (3, 2), np.float32),
    "int16_to_uint16": ((2, 5), np.int16, (2, 5), np.uint16),
    "int32_to_float32": ((4,), np.int32, (4,), np.float32),
    "int64_to_int32": ((2,), np.int64, (2, 2), np.int32),
    "scalar_float32_to_uint8": ((), np.float32, (4,), np.uint8),
}


@pytest.mark.parametrize("case", BITCAST_CASES, ids=BITCAST_CASES.keys())
def test_bitcast(case: str) -> None:
    in_shape, in_dtype, out_shape, out_dtype = BITCAST_CASES[case]
    x = random_array(_rng("bitcast", case), in_shape, in_dtype)
    if np.dtype(in_dtype).kind == "f":
        x = x * 1000  # sign, exponent and mantissa bits all vary
    assert_matches_litert(*one_op("BITCAST", [In(x)], [(out_shape, out_dtype)]))


def test_bitcast_refuses_wrong_last_dimension() -> None:
    x = np.arange(6, dtype=np.uint8).reshape(2, 3)
    assert_both_refuse(*one_op("BITCAST", [In(x)], [((2,), np.int32)]), match="last dimension")


@pytest.mark.parametrize("shape", [(), (7,), (2, 3, 4, 5), (1, 1, 2, 1, 3)], ids=str)
def test_rank(shape: tuple) -> None:
    x = random_array(_rng("rank", shape), shape)
    assert_matches_litert(*one_op("RANK", [In(x)], [((), np.int32)]))


BROADCAST_ARGS_CASES = {
    "same_length": ([2, 1, 3], [1, 4, 3]),
    "shorter_second": ([5, 2, 1, 3], [4, 1]),
    "shorter_first": ([3], [2, 4, 3]),
    "zero_dim": ([0, 1], [1, 7]),
    "empty_shape": ([], [2, 3]),
}


@pytest.mark.parametrize("dtype", [np.int32, np.int64], ids=["int32", "int64"])
@pytest.mark.parametrize("case", BROADCAST_ARGS_CASES, ids=BROADCAST_ARGS_CASES.keys())
def test_broadcast_args(case: str, dtype: type) -> None:
    s1, s2 = BROADCAST_ARGS_CASES[case]
    n = max(len(s1), len(s2))
    model, feeds = one_op(
        "BROADCAST_ARGS", [In(np.array(s1, dtype)), Const(s2, dtype)], [((n,), dtype)]
    )
    assert_matches_litert(model, feeds)


def test_broadcast_args_refuses_clashing_shapes() -> None:
    """LiteRT aborts the process on these (a TFLITE_CHECK): ours alone."""
    model, feeds = one_op(
        "BROADCAST_ARGS", [Const([2, 3]), In(np.array([4, 3], np.int32))], [((2,), np.int32)]
    )
    with pytest.raises(ModelError, match=r"BROADCAST_ARGS.*\[2, 3\] and \[4, 3\] do not broadcast"):
        run_ours(model, feeds)


# -- FAKE_QUANT -----------------------------------------------------------------------------

#: name -> (min, max, num_bits, version)
FAKE_QUANT_CASES = {
    "symmetric_8bit": (-1.0, 1.0, 8, 1),
    "relu6_8bit": (0.0, 6.0, 8, 1),
    "asymmetric_4bit": (-3.3, 2.1, 4, 2),
    "min_above_zero": (0.5, 2.0, 8, 2),
    "max_below_zero": (-2.0, -0.5, 8, 1),
    "16bit": (-1.0, 1.0, 16, 2),
    "2bit": (-0.7, 1.3, 2, 2),
}


@pytest.mark.parametrize("case", FAKE_QUANT_CASES, ids=FAKE_QUANT_CASES.keys())
def test_fake_quant(case: str) -> None:
    lo, hi, bits, version = FAKE_QUANT_CASES[case]
    rng = _rng("fake_quant", case)
    x = rng.uniform(lo - 1, hi + 1, (3, 4, 5)).astype(np.float32)
    x[0, 0, :3] = [lo, hi, np.nan]
    options = {"min": lo, "max": hi, "num_bits": bits}
    if version == 2:
        options["narrow_range"] = False
    model, feeds = one_op("FAKE_QUANT", [In(x)], [(x.shape, np.float32)], version, **options)
    assert_matches_litert(model, feeds)


def test_fake_quant_refuses_narrow_range() -> None:
    x = np.zeros((4,), np.float32)
    model, feeds = one_op(
        "FAKE_QUANT", [In(x)], [(x.shape, np.float32)], 2, min=-1.0, max=1.0, narrow_range=True
    )
    assert_both_refuse(model, feeds, match="FAKE_QUANT.*narrow_range")


@pytest.mark.parametrize(
    "options,match",
    [
        ({"min": 1.0, "max": 1.0, "num_bits": 8}, "below max"),
        ({"min": -1.0, "max": 1.0, "num_bits": 1}, "num_bits"),
    ],
    ids=["min_equals_max", "one_bit"],
)
def test_fake_quant_refuses_bad_options(options: dict, match: str) -> None:
    """LiteRT runs these (min == max gives NaN everywhere); TensorFlow's op refuses them."""
    x = np.zeros((4,), np.float32)
    with pytest.raises(ModelError, match=f"FAKE_QUANT.*{match}"):
        run_ours(*one_op("FAKE_QUANT", [In(x)], [(x.shape, np.float32)], **options))
