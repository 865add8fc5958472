"""REDUCE_WINDOW (TFLite's builtin with ReduceWindowOptions) against LiteRT."""

from __future__ import annotations

import numpy as np
import pytest

from delegate_runtime.errors import ModelError
from tests.ops.conftest import assert_matches_litert, run_ours
from tests.ops.oneop import Const, In, one_op, random_array

RNG = np.random.default_rng(42)
#: ReduceWindowFunction codes.
FUNCTION = {"ADD": 1, "MUL": 2, "MINIMUM": 3, "MAXIMUM": 4, "ALL": 5, "ANY": 6}


def out_shape(shape, window, strides, dilations) -> tuple[int, ...]:
    spans = [(w - 1) * d + 1 for w, d in zip(window, dilations, strict=True)]
    return tuple(
        0 if n < s else (n - s) // st + 1 for n, s, st in zip(shape, spans, strides, strict=True)
    )


def build(x, init, window, strides, dilations, function):
    shape = out_shape(x.shape, window, strides, dilations)
    return one_op(
        "REDUCE_WINDOW",
        [
            In(x),
            Const(init, x.dtype),
            Const(window, np.int64),
            Const(strides, np.int64),
            Const(dilations, np.int64),
        ],
        [(shape, x.dtype)],
        reduce_function=FUNCTION[function],
    )


def values(shape, dtype) -> np.ndarray:
    if np.dtype(dtype) == np.bool_:
        return RNG.random(shape) > 0.3
    if np.dtype(dtype).kind in "iu":
        return RNG.integers(0 if np.dtype(dtype).kind == "u" else -20, 20, shape).astype(dtype)
    return random_array(RNG, shape, dtype)


CASES = {
    "add_f32_2x2_stride1": ((4, 5), np.float32, 0, [2, 2], [1, 1], [1, 1], "ADD"),
    "add_f32_stride2": ((5, 6), np.float32, 0, [2, 3], [2, 2], [1, 1], "ADD"),
    "add_f32_dilated": ((6, 7), np.float32, 1.5, [2, 2], [1, 2], [2, 3], "ADD"),
    "max_f32_pool_nhwc": (
        (1, 6, 6, 2),
        np.float32,
        -np.inf,
        [1, 3, 3, 1],
        [1, 2, 2, 1],
        [1, 1, 1, 1],
        "MAXIMUM",
    ),
    "min_f32_1d": ((9,), np.float32, np.inf, [3], [2], [1], "MINIMUM"),
    "mul_f32": ((3, 4), np.float32, 1, [2, 2], [1, 2], [1, 1], "MUL"),
    "f64_add": ((4, 4), np.float64, 0, [3, 2], [1, 1], [1, 2], "ADD"),
    "int32_add_rank3": ((2, 4, 5), np.int32, 0, [1, 2, 3], [1, 1, 2], [1, 1, 1], "ADD"),
    "int8_add_wraps": ((6,), np.int8, 100, [4], [1], [1], "ADD"),
    "int16_max": ((5, 5), np.int16, -32768, [2, 2], [2, 2], [2, 1], "MAXIMUM"),
    "int64_mul": ((5,), np.int64, 1, [2], [1], [2], "MUL"),
    "uint8_min": ((4, 6), np.uint8, 255, [2, 3], [2, 3], [1, 1], "MINIMUM"),
    "bool_all": ((4, 4), np.bool_, True, [2, 2], [1, 1], [1, 1], "ALL"),
    "bool_any": ((4, 4), np.bool_, False, [3, 1], [1, 2], [1, 1], "ANY"),
    "int32_any": ((6,), np.int32, 0, [2], [2], [1], "ANY"),
    "window_larger_than_one_dim": ((2, 6), np.float32, 0, [3, 2], [1, 1], [1, 1], "ADD"),
}


@pytest.mark.parametrize("case", CASES, ids=CASES.keys())
def test_reduce_window(case):
    shape, dtype, init, window, strides, dilations, function = CASES[case]
    if case == "int8_add_wraps":
        x = np.array([100, 27, 1, -5, 90, 60], np.int8)
    else:
        x = values(shape, dtype)
    model, feeds = build(x, init, window, strides, dilations, function)
    if 0 in out_shape(shape, window, strides, dilations):
        # LiteRT's Python API cannot return an empty tensor: this one is ours alone.
        assert run_ours(model, feeds)[0].shape == (0, 5)
        return
    assert_matches_litert(model, feeds)


def test_reduce_window_zero_stride_is_a_model_error():
    x = values((4,), np.float32)
    model, feeds = one_op(
        "REDUCE_WINDOW",
        [
            In(x),
            Const(0, np.float32),
            Const([2], np.int64),
            Const([0], np.int64),
            Const([1], np.int64),
        ],
        [((3,), np.float32)],
        reduce_function=FUNCTION["ADD"],
    )
    with pytest.raises(
        ModelError, match=r"REDUCE_WINDOW.*window strides \[0\] must all be positive"
    ):
        run_ours(model, feeds)


def test_reduce_window_unsupported_function_is_a_model_error():
    model, feeds = one_op(
        "REDUCE_WINDOW",
        [
            In(values((4,), np.float32)),
            Const(0, np.float32),
            Const([2], np.int64),
            Const([1], np.int64),
            Const([1], np.int64),
        ],
        [((3,), np.float32)],
        reduce_function=0,
    )
    with pytest.raises(ModelError, match=r"REDUCE_WINDOW.*reduce_function 0 is not supported"):
        run_ours(model, feeds)
