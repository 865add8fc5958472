"""SEGMENT_SUM and UNSORTED_SEGMENT_{SUM,MAX,MIN,PROD} against LiteRT's reference kernels."""

from __future__ import annotations

import numpy as np
import pytest

from delegate_runtime.errors import ModelError
from tests.ops.conftest import assert_matches_litert, run_ours
from tests.ops.oneop import Const, In, one_op, random_array

RNG = np.random.default_rng(41)


def data(shape, dtype) -> np.ndarray:
    if np.dtype(dtype) == np.int32:
        return RNG.integers(-9, 10, shape).astype(np.int32)
    return random_array(RNG, shape, dtype)


# -- SEGMENT_SUM -----------------------------------------------------------------------------

SEGMENT_SUM_CASES = {
    "f32_vector": ((6,), [0, 0, 1, 2, 2, 2], np.float32),
    "f32_rows": ((5, 3), [0, 1, 1, 1, 2], np.float32),
    "f32_rank3": ((4, 2, 2), [0, 0, 0, 1], np.float32),
    "int32_rows": ((4, 2), [0, 1, 2, 3], np.int32),
    "int32_one_segment": ((3, 3), [0, 0, 0], np.int32),
}


@pytest.mark.parametrize("case", SEGMENT_SUM_CASES, ids=SEGMENT_SUM_CASES.keys())
def test_segment_sum(case):
    shape, ids, dtype = SEGMENT_SUM_CASES[case]
    out = (ids[-1] + 1,) + shape[1:]
    model, feeds = one_op("SEGMENT_SUM", [In(data(shape, dtype)), Const(ids)], [(out, dtype)])
    assert_matches_litert(model, feeds)


def test_segment_sum_runtime_ids():
    """The ids are an input: the number of output rows exists only at run time."""
    ids = np.array([0, 0, 1, 1, 1, 2, 3], np.int32)
    model, feeds = one_op(
        "SEGMENT_SUM", [In(data((7, 2), np.float32)), In(ids)], [((1, 2), np.float32)]
    )
    got = assert_matches_litert(model, feeds)
    assert got[0].shape == (4, 2)


def test_segment_sum_int32_wraps():
    x = np.array([2**31 - 1, 1, 5], np.int32)
    model, feeds = one_op("SEGMENT_SUM", [In(x), Const([0, 0, 1])], [((2,), np.int32)])
    got = assert_matches_litert(model, feeds)
    assert got[0].tolist() == [-(2**31), 5]


def test_segment_sum_unsorted_ids_are_a_model_error():
    model, feeds = one_op(
        "SEGMENT_SUM", [In(data((3,), np.float32)), Const([0, 2, 1])], [((3,), np.float32)]
    )
    with pytest.raises(ModelError, match=r"SEGMENT_SUM.*must start at 0 and grow by 0 or 1"):
        run_ours(model, feeds)


# -- UNSORTED_SEGMENT_* ----------------------------------------------------------------------

OPS = (
    "UNSORTED_SEGMENT_SUM",
    "UNSORTED_SEGMENT_MAX",
    "UNSORTED_SEGMENT_MIN",
    "UNSORTED_SEGMENT_PROD",
)

UNSORTED_CASES = {
    "f32_vector": ((6,), [3, 0, 3, 1, 0, 3], 4, np.float32),
    "f32_rows_empty_segment": ((5, 3), [2, 0, 2, 0, 2], 4, np.float32),
    "f32_matrix_ids": ((2, 3, 2), [[1, 0, 1], [2, 2, 0]], 3, np.float32),
    "int32_rows": ((4, 2), [1, 1, 0, 1], 2, np.int32),
    "int32_negative_ids_skipped": ((5,), [0, -1, 1, -3, 1], 3, np.int32),
    "f32_all_ids_one_segment": ((3, 2), [0, 0, 0], 1, np.float32),
}


@pytest.mark.parametrize("op", OPS, ids=[o.removeprefix("UNSORTED_SEGMENT_").lower() for o in OPS])
@pytest.mark.parametrize("case", UNSORTED_CASES, ids=UNSORTED_CASES.keys())
def test_unsorted_segment(op, case):
    shape, ids, segments, dtype = UNSORTED_CASES[case]
    ids = np.asarray(ids, np.int32)
    out = (segments,) + shape[ids.ndim :]
    model, feeds = one_op(op, [In(data(shape, dtype)), Const(ids), Const(segments)], [(out, dtype)])
    assert_matches_litert(model, feeds)


@pytest.mark.parametrize("op", OPS, ids=[o.removeprefix("UNSORTED_SEGMENT_").lower() for o in OPS])
def test_unsorted_segment_runtime_count(op):
    """num_segments is an input: the output shape exists only at run time."""
    model, feeds = one_op(
        op,
        [
            In(data((4, 2), np.float32)),
            In(np.array([1, 0, 1, 4], np.int32)),
            In(np.array(5, np.int32)),
        ],
        [((1, 2), np.float32)],
    )
    got = assert_matches_litert(model, feeds)
    assert got[0].shape == (5, 2)


def test_unsorted_segment_prod_int32_wraps():
    x = np.array([65536, 65536, 3], np.int32)
    model, feeds = one_op(
        "UNSORTED_SEGMENT_PROD", [In(x), Const([0, 0, 1]), Const(2)], [((2,), np.int32)]
    )
    got = assert_matches_litert(model, feeds)
    assert got[0].tolist() == [0, 3]


@pytest.mark.parametrize("op", OPS, ids=[o.removeprefix("UNSORTED_SEGMENT_").lower() for o in OPS])
def test_unsorted_segment_id_past_num_segments_is_a_model_error(op):
    model, feeds = one_op(
        op, [In(data((3,), np.float32)), Const([0, 3, 1]), Const(3)], [((3,), np.float32)]
    )
    with pytest.raises(ModelError, match=rf"{op}.*segment id 3 is out of range for 3 segments"):
        run_ours(model, feeds)
