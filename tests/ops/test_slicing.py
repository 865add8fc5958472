"""STRIDED_SLICE, SLICE, SPLIT, SPLIT_V, PAD, PADV2, MIRROR_PAD against LiteRT: one one-op
model per configuration."""

from __future__ import annotations

import numpy as np
import pytest

from delegate_runtime.builder import Quant
from delegate_runtime.errors import ModelError
from tests.ops.conftest import assert_matches_litert, run_ours
from tests.ops.oneop import Const, In, one_op, random_array

RNG = np.random.default_rng(11)
Q8 = Quant(0.05, -3)
QU8 = Quant(0.1, 130)


def rand(shape, dtype=np.float32) -> np.ndarray:
    return random_array(RNG, shape, dtype)


# -- STRIDED_SLICE ---------------------------------------------------------------------------

S = slice
E = Ellipsis
N = None

#: name -> (input shape, begin, end, strides, options, the same slice in numpy)
STRIDED_CASES = {
    "basic": ((4, 5), [1, 0], [3, 4], [1, 1], {}, (S(1, 3), S(0, 4))),
    "stride2": ((6, 7), [0, 1], [6, 7], [2, 3], {}, (S(0, 6, 2), S(1, 7, 3))),
    "begin_mask": ((4, 5), [3, 2], [4, 5], [1, 1], {"begin_mask": 1}, (S(None, 4), S(2, 5))),
    "end_mask": ((4, 5), [1, 2], [0, 0], [1, 1], {"end_mask": 3}, (S(1, None), S(2, None))),
    "begin_end_masks": (
        (4, 5),
        [2, 2],
        [1, 1],
        [1, 2],
        {"begin_mask": 3, "end_mask": 3},
        (S(None), S(None, None, 2)),
    ),
    "negative_indices": ((4, 5), [-3, -4], [-1, -1], [1, 1], {}, (S(-3, -1), S(-4, -1))),
    "reverse_full": (
        (4, 5),
        [0, 0],
        [0, 0],
        [-1, -1],
        {"begin_mask": 3, "end_mask": 3},
        (S(None, None, -1), S(None, None, -1)),
    ),
    "reverse_partial": ((6,), [4], [0], [-1], {}, (S(4, 0, -1),)),
    "reverse_to_start": ((6,), [4], [0], [-2], {"end_mask": 1}, (S(4, None, -2),)),
    "reverse_negative_indices": ((6,), [-1], [-5], [-1], {}, (S(-1, -5, -1),)),
    "reverse_end_minus_one_is_last": ((6,), [5], [-1], [-1], {}, (S(5, -1, -1),)),
    "clamped_out_of_range": ((5, 4), [-10, 1], [10, 20], [1, 1], {}, (S(-10, 10), S(1, 20))),
    "empty_begin_past_end": ((5,), [4], [2], [1], {}, (S(4, 2),)),
    "shrink_one": ((4, 5), [2, 0], [3, 5], [1, 1], {"shrink_axis_mask": 1}, (2, S(0, 5))),
    "shrink_negative": ((4, 5), [0, -1], [4, 0], [1, 1], {"shrink_axis_mask": 2}, (S(0, 4), -1)),
    "shrink_all": ((4, 5), [1, 3], [2, 4], [1, 1], {"shrink_axis_mask": 3}, (1, 3)),
    "fewer_specs_than_rank": ((4, 5, 3), [1], [3], [1], {}, (S(1, 3),)),
    "ellipsis_front": ((2, 3, 4, 5), [0, 1], [0, 4], [1, 2], {"ellipsis_mask": 1}, (E, S(1, 4, 2))),
    "ellipsis_middle": (
        (2, 3, 4, 5),
        [1, 0, 2],
        [2, 0, 5],
        [1, 1, 1],
        {"ellipsis_mask": 2},
        (S(1, 2), E, S(2, 5)),
    ),
    "ellipsis_end": ((2, 3, 4), [1, 0], [2, 0], [1, 1], {"ellipsis_mask": 2}, (S(1, 2), E)),
    "ellipsis_shrink": (
        (2, 3, 4),
        [0, 2],
        [0, 3],
        [1, 1],
        {"ellipsis_mask": 1, "shrink_axis_mask": 2},
        (E, 2),
    ),
    "new_axis_front": (
        (3, 4),
        [0, 1, 0],
        [1, 3, 4],
        [1, 1, 1],
        {"new_axis_mask": 1},
        (N, S(1, 3), S(0, 4)),
    ),
    "new_axis_middle": (
        (3, 4),
        [0, 0, 1],
        [3, 1, 4],
        [1, 1, 2],
        {"new_axis_mask": 2},
        (S(0, 3), N, S(1, 4, 2)),
    ),
    "new_axis_and_ellipsis": (
        (2, 3, 4),
        [0, 0, 1],
        [0, 1, 3],
        [1, 1, 1],
        {"ellipsis_mask": 1, "new_axis_mask": 2},
        (E, N, S(1, 3)),
    ),
    "new_axis_shrink": (
        (3, 4),
        [0, 2],
        [1, 3],
        [1, 1],
        {"new_axis_mask": 1, "shrink_axis_mask": 2},
        (N, 2),
    ),
    "all_masks": (
        (2, 3, 4, 5),
        [0, 0, 1, 0, 4],
        [0, 1, 0, 0, 0],
        [1, 1, 1, 1, -2],
        {
            "begin_mask": 4,
            "end_mask": 20,
            "ellipsis_mask": 1,
            "new_axis_mask": 2,
            "shrink_axis_mask": 8,
        },
        (E, N, S(None), 0, S(4, None, -2)),
    ),
    "five_dims": (
        (2, 3, 2, 4, 3),
        [0, 1, 0, 1, 2],
        [2, 3, 1, 4, 0],
        [1, 1, 1, 2, -1],
        {},
        (S(0, 2), S(1, 3), S(0, 1), S(1, 4, 2), S(2, 0, -1)),
    ),
    "offset": ((6, 5), [1, 2], [3, 2], [1, 1], {"offset": True}, (S(1, 4), S(2, 4))),
    "offset_stride": ((8,), [1], [6], [2], {"offset": True}, (S(1, 7, 2),)),
}


@pytest.mark.parametrize("case", STRIDED_CASES)
def test_strided_slice(case):
    shape, begin, end, strides, opts, numpy_index = STRIDED_CASES[case]
    x = rand(shape)
    expect = x[numpy_index]
    out = run_ours(*_strided(x, begin, end, strides, expect.shape, opts))[0]
    np.testing.assert_array_equal(out, expect)
    assert_matches_litert(*_strided(x, begin, end, strides, expect.shape, opts))


def _strided(x, begin, end, strides, out_shape, opts, quant=None, index_type=np.int32):
    args = [In(x, quant)] + [Const(v, index_type) for v in (begin, end, strides)]
    version = 8 if opts.get("offset") else (4 if x.ndim > 4 else 1)
    return one_op("STRIDED_SLICE", args, [(out_shape, x.dtype, quant)], version=version, **opts)


STRIDED_TYPES = {
    "int8": (np.int8, Q8),
    "uint8": (np.uint8, QU8),
    "int32": (np.int32, None),
    "int64": (np.int64, None),
    "bool": (np.bool_, None),
}


@pytest.mark.parametrize("case", STRIDED_TYPES)
def test_strided_slice_types(case):
    dtype, quant = STRIDED_TYPES[case]
    x = rand((3, 6), dtype)
    expect = x[1:, 5:0:-2]
    model, feeds = _strided(x, [1, 5], [3, 0], [1, -2], expect.shape, {}, quant)
    assert_matches_litert(model, feeds)


def test_strided_slice_int64_indices_are_a_model_error():
    """TFLite's kernel takes int32 begin/end/strides only."""
    model, feeds = _strided(rand((4, 5)), [1, 0], [3, 5], [1, 2], (2, 3), {}, index_type=np.int64)
    with pytest.raises(ModelError, match="STRIDED_SLICE.*begin dtype int64"):
        run_ours(model, feeds)


def test_strided_slice_zero_stride_is_a_model_error():
    model, feeds = _strided(rand((4,)), [0], [4], [0], (4,), {})
    with pytest.raises(ModelError, match="strides must be non-zero"):
        run_ours(model, feeds)


# -- SLICE -----------------------------------------------------------------------------------

SLICE_CASES = {
    "basic": ((4, 5, 3), [1, 0, 1], [2, 3, 2], np.float32, None),
    "size_minus_one": ((4, 5, 3), [1, 2, 0], [-1, 2, -1], np.float32, None),
    "whole": ((4, 5), [0, 0], [4, 5], np.float32, None),
    "int8": ((4, 5), [1, 1], [2, -1], np.int8, Q8),
    "int32": ((4, 5), [3, 1], [1, 3], np.int32, None),
    "bool": ((4, 5), [1, 1], [2, 2], np.bool_, None),
    "five_dims": ((2, 2, 3, 2, 4), [0, 1, 1, 0, 2], [2, 1, -1, 1, 2], np.float32, None),
}


@pytest.mark.parametrize("case", SLICE_CASES)
def test_slice(case):
    shape, begin, size, dtype, quant = SLICE_CASES[case]
    x = rand(shape, dtype)
    out_shape = tuple(d - b if s == -1 else s for d, b, s in zip(shape, begin, size, strict=True))
    version = 5 if len(shape) > 4 else 1
    model, feeds = one_op(
        "SLICE", [In(x, quant), Const(begin), Const(size)], [(out_shape, dtype, quant)], version
    )
    assert_matches_litert(model, feeds)


def test_slice_int64_indices():
    args = [In(rand((4, 5))), Const([1, 2], np.int64), Const([2, -1], np.int64)]
    model, feeds = one_op("SLICE", args, [((2, 3), np.float32)])
    assert_matches_litert(model, feeds)


def test_slice_out_of_range_is_a_model_error():
    model, feeds = one_op("SLICE", [In(rand((4,))), Const([2]), Const([3])], [((3,), np.float32)])
    with pytest.raises(ModelError, match="do not fit shape"):
        run_ours(model, feeds)


# -- SPLIT / SPLIT_V -------------------------------------------------------------------------

SPLIT_CASES = {
    "axis0": ((6, 4), 0, 3, np.float32, None),
    "axis1": ((2, 6), 1, 2, np.float32, None),
    "axis_negative": ((2, 3, 4), -1, 4, np.float32, None),
    "int8": ((2, 6), 1, 3, np.int8, Q8),
    "int32": ((4, 2), 0, 2, np.int32, None),
}


@pytest.mark.parametrize("case", SPLIT_CASES)
def test_split(case):
    shape, axis, n, dtype, quant = SPLIT_CASES[case]
    x = rand(shape, dtype)
    parts = np.split(x, n, axis)
    model, feeds = one_op(
        "SPLIT",
        [Const(axis), In(x, quant)],
        [(p.shape, dtype, quant) for p in parts],
        num_splits=n,
    )
    assert_matches_litert(model, feeds)


SPLIT_V_CASES = {
    "sizes": ((7, 3), [2, 4, 1], 0, np.float32, None),
    "minus_one": ((3, 9), [2, -1, 3], 1, np.float32, None),
    "axis_negative": ((2, 3, 5), [1, 4], -1, np.float32, None),
    "one_part": ((4, 2), [-1], 0, np.float32, None),
    "int8": ((2, 6), [5, 1], 1, np.int8, Q8),
}


@pytest.mark.parametrize("case", SPLIT_V_CASES)
def test_split_v(case):
    shape, sizes, axis, dtype, quant = SPLIT_V_CASES[case]
    x = rand(shape, dtype)
    dim = shape[axis]
    real = [dim - (sum(sizes) + 1) if s == -1 else s for s in sizes]
    parts = np.split(x, np.cumsum(real)[:-1], axis)
    model, feeds = one_op(
        "SPLIT_V",
        [In(x, quant), Const(sizes), Const(axis)],
        [(p.shape, dtype, quant) for p in parts],
        num_splits=len(sizes),
    )
    assert_matches_litert(model, feeds)


def test_split_uneven_is_a_model_error():
    model, feeds = one_op(
        "SPLIT", [Const(0), In(rand((5,)))], [((2,), np.float32)] * 2, num_splits=2
    )
    with pytest.raises(ModelError, match="equal parts"):
        run_ours(model, feeds)


# -- PAD / PADV2 / MIRROR_PAD ----------------------------------------------------------------

PAD_CASES = {
    "float_4d": ((1, 3, 3, 2), [[0, 0], [1, 2], [2, 1], [0, 0]], np.float32, None),
    "float_1d": ((5,), [[3, 1]], np.float32, None),
    "float_5d": ((1, 2, 2, 2, 2), [[0, 1], [1, 0], [0, 0], [2, 1], [0, 1]], np.float32, None),
    "int8_zero_point": ((1, 2, 3, 2), [[0, 0], [1, 1], [0, 2], [0, 0]], np.int8, Q8),
    "uint8_zero_point": ((1, 2, 3, 2), [[0, 0], [2, 1], [1, 1], [0, 0]], np.uint8, QU8),
    "int16": ((1, 2, 3, 2), [[0, 0], [1, 0], [0, 1], [0, 0]], np.int16, Quant(0.001, 0)),
    "int32": ((2, 3), [[1, 0], [0, 2]], np.int32, None),
    "int64": ((2, 3), [[1, 1], [1, 1]], np.int64, None),
}


@pytest.mark.parametrize("case", PAD_CASES)
def test_pad(case):
    shape, pads, dtype, quant = PAD_CASES[case]
    x = rand(shape, dtype)
    out_shape = tuple(d + a + b for d, (a, b) in zip(shape, pads, strict=True))
    version = 4 if len(shape) > 4 else (2 if quant else 1)
    model, feeds = one_op("PAD", [In(x, quant), Const(pads)], [(out_shape, dtype, quant)], version)
    got = assert_matches_litert(model, feeds)
    if quant is not None:
        assert np.all(got[0][(slice(None),) * 1 + (slice(0, pads[1][0]),)] == quant.zero_point)


def test_pad_int64_paddings():
    pads = np.array([[1, 0], [0, 2]], np.int64)
    model, feeds = one_op("PAD", [In(rand((2, 3))), Const(pads, np.int64)], [((3, 5), np.float32)])
    assert_matches_litert(model, feeds)


def test_pad_runtime_paddings():
    pads = np.array([[1, 2], [0, 1]], np.int32)
    model, feeds = one_op("PAD", [In(rand((2, 3))), In(pads)], [((1, 1), np.float32)])
    assert_matches_litert(model, feeds)


PADV2_CASES = {
    "float": (np.float32, None, 2.5),
    "int8": (np.int8, Q8, -100),
    "uint8": (np.uint8, QU8, 7),
    "int32": (np.int32, None, -9),
}


@pytest.mark.parametrize("case", PADV2_CASES)
def test_padv2(case):
    dtype, quant, value = PADV2_CASES[case]
    x = rand((1, 2, 3, 1), dtype)
    pads = [[0, 0], [1, 1], [2, 0], [0, 1]]
    args = [In(x, quant), Const(pads), Const([value], dtype, quant)]
    version = 2 if quant else 1
    model, feeds = one_op("PADV2", args, [((1, 4, 5, 2), dtype, quant)], version)
    got = assert_matches_litert(model, feeds)
    assert got[0][0, 0, 0, 0] == np.asarray(value, dtype)


MIRROR_CASES = {
    "reflect": ((3, 4), [[1, 2], [3, 0]], "REFLECT", np.float32, None),
    "symmetric": ((3, 4), [[3, 2], [1, 4]], "SYMMETRIC", np.float32, None),
    "reflect_4d": ((1, 3, 3, 2), [[0, 0], [2, 2], [1, 2], [0, 0]], "REFLECT", np.float32, None),
    "symmetric_int8": ((1, 3, 3, 2), [[0, 0], [1, 3], [3, 1], [0, 0]], "SYMMETRIC", np.int8, Q8),
    "reflect_uint8": ((2, 4), [[1, 1], [3, 2]], "REFLECT", np.uint8, QU8),
    "reflect_int32": ((2, 4), [[1, 0], [0, 2]], "REFLECT", np.int32, None),
}


@pytest.mark.parametrize("case", MIRROR_CASES)
def test_mirror_pad(case):
    shape, pads, mode, dtype, quant = MIRROR_CASES[case]
    x = rand(shape, dtype)
    out_shape = tuple(d + a + b for d, (a, b) in zip(shape, pads, strict=True))
    model, feeds = one_op(
        "MIRROR_PAD", [In(x, quant), Const(pads)], [(out_shape, dtype, quant)], mode=mode
    )
    assert_matches_litert(model, feeds)


def test_negative_padding_is_a_model_error():
    model, feeds = one_op("PAD", [In(rand((3,))), Const([[-1, 0]])], [((2,), np.float32)])
    with pytest.raises(ModelError, match="must not be negative"):
        run_ours(model, feeds)
