"""Indexing and scattering ops against LiteRT: ONE_HOT, TOPK_V2, REVERSE_V2,
REVERSE_SEQUENCE, MATRIX_DIAG, MATRIX_SET_DIAG, UNIQUE, SCATTER_ND, DYNAMIC_UPDATE_SLICE,
SPARSE_TO_DENSE, EMBEDDING_LOOKUP, EMBEDDING_LOOKUP_SPARSE, BUCKETIZE, DILATE."""

from __future__ import annotations

import numpy as np
import pytest

from delegate_runtime.builder import Quant
from delegate_runtime.errors import ModelError
from tests.ops.conftest import assert_matches_litert, run_ours
from tests.ops.oneop import Const, In, one_op, random_array

RNG = np.random.default_rng(40)
Q8 = Quant(0.05, 3)


def rand(shape, dtype=np.float32) -> np.ndarray:
    return random_array(RNG, shape, dtype)


def ints(lo: int, hi: int, shape, dtype=np.int32) -> np.ndarray:
    return RNG.integers(lo, hi, shape).astype(dtype)


# -- ONE_HOT ---------------------------------------------------------------------------------

ONE_HOT_CASES = {
    "vector_last_axis_f32": ((5,), -1, np.float32, np.int32, 4),
    "matrix_axis0_f32": ((2, 3), 0, np.float32, np.int32, 5),
    "matrix_axis1_int32": ((2, 3), 1, np.int32, np.int32, 3),
    "int64_indices_int64_out": ((4,), -1, np.int64, np.int64, 6),
    "int8_out": ((3, 2), -1, np.int8, np.int32, 3),
    "uint8_out": ((3,), 0, np.uint8, np.int32, 4),
    "bool_out": ((2, 2), 2, np.bool_, np.int32, 3),
}


@pytest.mark.parametrize("case", ONE_HOT_CASES, ids=ONE_HOT_CASES.keys())
def test_one_hot(case):
    shape, axis, dtype, idx_type, depth = ONE_HOT_CASES[case]
    indices = ints(-1, depth + 1, shape, idx_type)  # -1 and depth give all-off rows
    on, off = (np.array(True), np.array(False)) if dtype == np.bool_ else (7, 2)
    out_axis = len(shape) if axis == -1 else axis
    out_shape = shape[:out_axis] + (depth,) + shape[out_axis:]
    args = [In(indices), Const(depth), Const(on, dtype), Const(off, dtype)]
    model, feeds = one_op("ONE_HOT", args, [(out_shape, dtype)], axis=axis)
    assert_matches_litert(model, feeds)


def test_one_hot_runtime_depth():
    """The depth is an input: the output shape exists only at run time."""
    args = [
        In(ints(0, 4, (3,))),
        In(np.array(4, np.int32)),
        Const(1.0, np.float32),
        Const(0.0, np.float32),
    ]
    model, feeds = one_op("ONE_HOT", args, [((3, 1), np.float32)], axis=-1)
    got = assert_matches_litert(model, feeds)
    assert got[0].shape == (3, 4)


def test_one_hot_negative_depth_is_a_model_error():
    args = [In(ints(0, 3, (3,))), Const(-2), Const(1.0, np.float32), Const(0.0, np.float32)]
    model, feeds = one_op("ONE_HOT", args, [((3, 1), np.float32)], axis=-1)
    with pytest.raises(ModelError, match=r"ONE_HOT.*depth -2 is negative"):
        run_ours(model, feeds)


# -- TOPK_V2 ---------------------------------------------------------------------------------

TOPK_CASES = {
    "f32_vector": ((8,), np.float32, 3, np.int32, np.int32, 1),
    "f32_matrix_all": ((3, 5), np.float32, 5, np.int32, np.int32, 1),
    "int8_v2": ((2, 6), np.int8, 4, np.int32, np.int32, 2),
    "uint8": ((2, 7), np.uint8, 2, np.int32, np.int32, 1),
    "int32_3d": ((2, 2, 6), np.int32, 3, np.int32, np.int32, 1),
    "int64": ((9,), np.int64, 5, np.int32, np.int32, 1),
    "int16_v3": ((3, 6), np.int16, 2, np.int32, np.int32, 3),
    "int16_k_and_indices_v3": ((2, 6), np.float32, 3, np.int16, np.int16, 3),
}


@pytest.mark.parametrize("case", TOPK_CASES, ids=TOPK_CASES.keys())
def test_topk_v2(case):
    shape, dtype, k, k_type, idx_type, version = TOPK_CASES[case]
    x = rand(shape, dtype)
    out = shape[:-1] + (k,)
    model, feeds = one_op(
        "TOPK_V2", [In(x), Const(k, k_type)], [(out, dtype), (out, idx_type)], version=version
    )
    assert_matches_litert(model, feeds)


@pytest.mark.parametrize("dtype", [np.float32, np.int32], ids=["f32", "int32"])
def test_topk_v2_ties_keep_the_lower_index_first(dtype):
    x = np.array([[3, 1, 3, 2, 3, 1, 2], [0, 0, 0, 0, 5, 0, 5]], dtype)
    model, feeds = one_op("TOPK_V2", [In(x), Const(4)], [((2, 4), dtype), ((2, 4), np.int32)])
    got = assert_matches_litert(model, feeds)
    assert got[1].tolist() == [[0, 2, 4, 3], [4, 6, 0, 1]]


def test_topk_v2_int8_quantized():
    """Quantized values pass through as their integers (same scale and zero point)."""
    x = rand((3, 7), np.int8)
    model, feeds = one_op(
        "TOPK_V2",
        [In(x, Q8), Const(3)],
        [((3, 3), np.int8, Q8), ((3, 3), np.int32)],
        version=2,
    )
    assert_matches_litert(model, feeds)


def test_topk_v2_k_past_the_row_is_a_model_error():
    model, feeds = one_op(
        "TOPK_V2", [In(rand((2, 3))), Const(4)], [((2, 4), np.float32), ((2, 4), np.int32)]
    )
    with pytest.raises(ModelError, match=r"TOPK_V2.*k 4 is larger than the last dimension 3"):
        run_ours(model, feeds)


# -- REVERSE_V2 ------------------------------------------------------------------------------

REVERSE_CASES = {
    "f32_axis0": ((3, 4), np.float32, [0], 1),
    "f32_axis_last_negative": ((2, 3, 4), np.float32, [-1], 1),
    "f32_two_adjacent_axes": ((2, 3, 4), np.float32, [1, 2], 1),
    "int32_middle": ((2, 3, 4), np.int32, [1], 1),
    "bool_v2": ((4, 2), np.bool_, [1], 2),
    "int8_v3": ((3, 5), np.int8, [0], 3),
    "int16": ((6,), np.int16, [0], 1),
    "int64": ((2, 5), np.int64, [1], 1),
    "uint8_all_axes": ((2, 3), np.uint8, [0, 1], 1),
}


@pytest.mark.parametrize("case", REVERSE_CASES, ids=REVERSE_CASES.keys())
def test_reverse_v2(case):
    shape, dtype, axes, version = REVERSE_CASES[case]
    model, feeds = one_op(
        "REVERSE_V2", [In(rand(shape, dtype)), Const(axes)], [(shape, dtype)], version=version
    )
    assert_matches_litert(model, feeds)


def test_reverse_v2_int8_quantized():
    x = rand((2, 5), np.int8)
    model, feeds = one_op("REVERSE_V2", [In(x, Q8), Const([1])], [((2, 5), np.int8, Q8)], version=3)
    assert_matches_litert(model, feeds)


def test_reverse_v2_non_adjacent_axes_is_a_model_error():
    model, feeds = one_op(
        "REVERSE_V2", [In(rand((2, 3, 4))), Const([0, 2])], [((2, 3, 4), np.float32)]
    )
    with pytest.raises(ModelError, match=r"REVERSE_V2.*not contiguous"):
        run_ours(model, feeds)


# -- REVERSE_SEQUENCE ------------------------------------------------------------------------

REVERSE_SEQUENCE_CASES = {
    "batch0_seq1": ((3, 5), 1, 0, [5, 2, 0], np.float32, np.int32),
    "batch1_seq0": ((4, 3), 0, 1, [1, 4, 3], np.float32, np.int32),
    "rank3_seq2_batch0": ((2, 3, 4), 2, 0, [3, 4], np.int32, np.int32),
    "rank3_seq0_batch2": ((4, 2, 3), 0, 2, [2, 0, 4], np.float32, np.int64),
    "int64_values": ((2, 6), 1, 0, [6, 3], np.int64, np.int32),
    "uint8_values": ((2, 4, 2), 1, 0, [3, 4], np.uint8, np.int32),
    "int16_values": ((3, 3), 1, 0, [1, 2, 3], np.int16, np.int64),
}


@pytest.mark.parametrize("case", REVERSE_SEQUENCE_CASES, ids=REVERSE_SEQUENCE_CASES.keys())
def test_reverse_sequence(case):
    shape, seq_dim, batch_dim, lengths, dtype, len_type = REVERSE_SEQUENCE_CASES[case]
    model, feeds = one_op(
        "REVERSE_SEQUENCE",
        [In(rand(shape, dtype)), Const(lengths, len_type)],
        [(shape, dtype)],
        seq_dim=seq_dim,
        batch_dim=batch_dim,
    )
    assert_matches_litert(model, feeds)


def test_reverse_sequence_length_past_the_sequence_is_a_model_error():
    model, feeds = one_op(
        "REVERSE_SEQUENCE",
        [In(rand((2, 3))), Const([3, 4])],
        [((2, 3), np.float32)],
        seq_dim=1,
        batch_dim=0,
    )
    with pytest.raises(ModelError, match=r"REVERSE_SEQUENCE.*seq_length 4 is outside \[0, 3\]"):
        run_ours(model, feeds)


# -- MATRIX_DIAG / MATRIX_SET_DIAG -----------------------------------------------------------

MATRIX_DIAG_CASES = {
    "f32_vector": ((4,), np.float32),
    "f32_batch": ((2, 3), np.float32),
    "int32_batch2": ((2, 2, 3), np.int32),
    "int8": ((3,), np.int8),
    "uint8": ((2, 4), np.uint8),
    "int64": ((5,), np.int64),
    "int16": ((2, 2), np.int16),
}


@pytest.mark.parametrize("case", MATRIX_DIAG_CASES, ids=MATRIX_DIAG_CASES.keys())
def test_matrix_diag(case):
    shape, dtype = MATRIX_DIAG_CASES[case]
    model, feeds = one_op("MATRIX_DIAG", [In(rand(shape, dtype))], [(shape + shape[-1:], dtype)])
    assert_matches_litert(model, feeds)


MATRIX_SET_DIAG_CASES = {
    "square_f32": ((3, 3), np.float32),
    "wide_f32": ((2, 4), np.float32),
    "tall_f32": ((4, 2), np.float32),
    "batch_int32": ((2, 3, 3), np.int32),
    "batch_wide_int8": ((2, 2, 3), np.int8),
    "uint8": ((3, 2), np.uint8),
    "int64": ((2, 2), np.int64),
}


@pytest.mark.parametrize("case", MATRIX_SET_DIAG_CASES, ids=MATRIX_SET_DIAG_CASES.keys())
def test_matrix_set_diag(case):
    shape, dtype = MATRIX_SET_DIAG_CASES[case]
    diag_shape = shape[:-2] + (min(shape[-2:]),)
    model, feeds = one_op(
        "MATRIX_SET_DIAG", [In(rand(shape, dtype)), In(rand(diag_shape, dtype))], [(shape, dtype)]
    )
    assert_matches_litert(model, feeds)


def test_matrix_set_diag_of_a_vector_is_a_model_error():
    model, feeds = one_op("MATRIX_SET_DIAG", [In(rand((3,))), In(rand((3,)))], [((3,), np.float32)])
    with pytest.raises(ModelError, match=r"MATRIX_SET_DIAG.*at least two dimensions"):
        run_ours(model, feeds)


# -- UNIQUE ----------------------------------------------------------------------------------

UNIQUE_CASES = {
    "f32_int32_index": (np.array([2.5, 1.0, 2.5, -3.0, 1.0, 7.0], np.float32), "int32"),
    "f32_int64_index": (np.array([0.5, 0.5, 0.5, 4.0], np.float32), "int64"),
    "int32": (np.array([5, 3, 5, 5, 9, 3, 0], np.int32), "int32"),
    "int64": (np.array([-1, 8, 8, -1, 2], np.int64), "int64"),
    "int8": (np.array([-128, 127, 0, 127, -128], np.int8), "int32"),
    "uint8": (np.array([200, 3, 200, 255], np.uint8), "int32"),
    "int16": (np.array([300, -300, 300], np.int16), "int64"),
    "all_distinct": (np.array([4, 3, 2, 1], np.int32), "int32"),
    "all_same": (np.array([6, 6, 6], np.int32), "int32"),
}


@pytest.mark.parametrize("case", UNIQUE_CASES, ids=UNIQUE_CASES.keys())
def test_unique(case):
    x, index_type = UNIQUE_CASES[case]
    idx_dtype = np.int64 if index_type == "int64" else np.int32
    model, feeds = one_op(
        "UNIQUE", [In(x)], [(x.shape, x.dtype), (x.shape, idx_dtype)], idx_out_type=index_type
    )
    assert_matches_litert(model, feeds)


def test_unique_of_a_matrix_is_a_model_error():
    model, feeds = one_op(
        "UNIQUE", [In(ints(0, 3, (2, 2)))], [((4,), np.int32), ((2, 2), np.int32)]
    )
    with pytest.raises(ModelError, match=r"UNIQUE.*must be a vector"):
        run_ours(model, feeds)


# -- SCATTER_ND ------------------------------------------------------------------------------

SCATTER_CASES = {
    "elements_1d": ([[1], [3], [0]], (3,), [5], np.float32),
    "elements_2d": ([[0, 1], [2, 2], [1, 0]], (3,), [3, 3], np.float32),
    "rows_of_matrix": ([[2], [0]], (2, 4), [3, 4], np.float32),
    "duplicates_add": ([[1], [1], [2], [1]], (4,), [4], np.float32),
    "batched_indices": ([[[0], [2]], [[1], [2]]], (2, 2, 3), [3, 3], np.float32),
    "int32_duplicates": ([[0], [0], [3]], (3, 2), [4, 2], np.int32),
    "int8": ([[1, 1], [0, 2]], (2,), [2, 3], np.int8),
    "uint8": ([[2], [0]], (2,), [3], np.uint8),
    "int64": ([[1]], (1, 3), [2, 3], np.int64),
    "bool": ([[0], [2], [0]], (3,), [4], np.bool_),
}


@pytest.mark.parametrize("case", SCATTER_CASES, ids=SCATTER_CASES.keys())
def test_scatter_nd(case):
    indices, upd_shape, shape, dtype = SCATTER_CASES[case]
    updates = rand(upd_shape, dtype) if dtype != np.int8 else ints(-40, 40, upd_shape, np.int8)
    model, feeds = one_op(
        "SCATTER_ND", [Const(indices), In(updates), Const(shape)], [(tuple(shape), dtype)]
    )
    assert_matches_litert(model, feeds)


def test_scatter_nd_index_out_of_range_is_a_model_error():
    model, feeds = one_op(
        "SCATTER_ND", [Const([[1], [4]]), In(rand((2,))), Const([4])], [((4,), np.float32)]
    )
    with pytest.raises(ModelError, match=r"SCATTER_ND.*index along dimension 0 4 is out of range"):
        run_ours(model, feeds)


# -- DYNAMIC_UPDATE_SLICE --------------------------------------------------------------------

DUS_CASES = {
    "f32_inside": ((4, 5), (2, 3), [1, 2], np.int32, np.float32, 1),
    "f32_negative_start_clamped": ((4, 5), (2, 2), [-3, 1], np.int32, np.float32, 1),
    "f32_start_past_end_clamped": ((4, 5), (2, 3), [3, 9], np.int32, np.float32, 1),
    "kv_cache_write": ((1, 2, 8, 4), (1, 2, 1, 4), [0, 0, 5, 0], np.int32, np.float32, 1),
    "whole_operand": ((2, 3), (2, 3), [1, 1], np.int32, np.float32, 1),
    "int64_indices_v2": ((3, 4), (1, 4), [2, 0], np.int64, np.float32, 2),
    "float16_v3": ((3, 4), (2, 2), [0, 1], np.int32, np.float16, 3),
    "int16_v4": ((5,), (2,), [4], np.int32, np.int16, 4),
    "int8": ((3, 3), (1, 2), [1, 1], np.int32, np.int8, 1),
    "int32": ((2, 4), (2, 1), [0, 3], np.int32, np.int32, 1),
    "int64_values": ((4,), (3,), [2], np.int32, np.int64, 1),
    "bool": ((3, 2), (2, 2), [1, 0], np.int32, np.bool_, 1),
}


@pytest.mark.parametrize("case", DUS_CASES, ids=DUS_CASES.keys())
def test_dynamic_update_slice(case):
    shape, upd_shape, start, start_type, dtype, version = DUS_CASES[case]
    model, feeds = one_op(
        "DYNAMIC_UPDATE_SLICE",
        [In(rand(shape, dtype)), In(rand(upd_shape, dtype)), In(np.array(start, start_type))],
        [(shape, dtype)],
        version=version,
    )
    assert_matches_litert(model, feeds)


def test_dynamic_update_slice_larger_update_is_a_model_error():
    model, feeds = one_op(
        "DYNAMIC_UPDATE_SLICE",
        [In(rand((2, 3))), In(rand((3, 1))), Const([0, 0])],
        [((2, 3), np.float32)],
    )
    with pytest.raises(ModelError, match=r"DYNAMIC_UPDATE_SLICE.*does not fit in operand"):
        run_ours(model, feeds)


# -- SPARSE_TO_DENSE -------------------------------------------------------------------------

STD_CASES = {
    "vector_indices_scalar_value": ([1, 4, 2], np.int32, [6], np.float32, "scalar", 1),
    "vector_indices_values": ([0, 3, 5], np.int32, [7], np.float32, "vector", 1),
    "scalar_index": (3, np.int32, [5], np.float32, "scalar", 1),
    "matrix_indices_2d": ([[0, 1], [2, 3], [1, 0]], np.int32, [3, 4], np.float32, "vector", 1),
    "matrix_indices_4d": (
        [[0, 1, 0, 2], [1, 0, 1, 0]],
        np.int32,
        [2, 2, 2, 3],
        np.float32,
        "vector",
        1,
    ),
    "int64_indices_int32_values": ([[1, 1], [0, 2]], np.int64, [2, 3], np.int32, "vector", 1),
    "int64_values_v2": ([2, 0], np.int32, [4], np.int64, "vector", 2),
    "int8_values_v3": ([[0, 0], [1, 1]], np.int32, [2, 2], np.int8, "vector", 3),
    "uint8_values_v3": ([1, 3], np.int64, [4], np.uint8, "scalar", 3),
    "repeated_index_keeps_last": ([2, 0, 2], np.int32, [3], np.float32, "vector", 1),
}


@pytest.mark.parametrize("case", STD_CASES, ids=STD_CASES.keys())
def test_sparse_to_dense(case):
    indices, idx_type, shape, dtype, kind, version = STD_CASES[case]
    n = np.asarray(indices).shape[0] if np.ndim(indices) else 1
    values = ints(1, 100, () if kind == "scalar" else (n,), dtype)
    model, feeds = one_op(
        "SPARSE_TO_DENSE",
        [
            Const(indices, idx_type),
            Const(shape, idx_type),
            In(values),
            Const(5 if dtype == np.uint8 else -5, dtype),
        ],
        [(tuple(shape), dtype)],
        version=version,
    )
    assert_matches_litert(model, feeds)


def test_sparse_to_dense_runtime_shape():
    """The output shape is an input: the output exists only at run time."""
    model, feeds = one_op(
        "SPARSE_TO_DENSE",
        [
            Const([[0, 1], [2, 0]]),
            In(np.array([3, 2], np.int32)),
            In(rand((2,))),
            Const(0.5, np.float32),
        ],
        [((1, 1), np.float32)],
    )
    got = assert_matches_litert(model, feeds)
    assert got[0].shape == (3, 2)


def test_sparse_to_dense_index_out_of_range_is_a_model_error():
    model, feeds = one_op(
        "SPARSE_TO_DENSE",
        [Const([1, 6]), Const([5]), In(rand((2,))), Const(0.0, np.float32)],
        [((5,), np.float32)],
    )
    with pytest.raises(
        ModelError, match=r"SPARSE_TO_DENSE.*index along dimension 0 6 is out of range"
    ):
        run_ours(model, feeds)


# -- EMBEDDING_LOOKUP ------------------------------------------------------------------------

EMBEDDING_CASES = {
    "f32_rows": ((5, 3), np.float32, [4, 0, 4, 2]),
    "f32_rank3": ((4, 2, 3), np.float32, [1, 3]),
    "int32_rows": ((3, 4), np.int32, [2, 2, 0]),
    "uint8_rows": ((6, 2), np.uint8, [5, 1]),
}


@pytest.mark.parametrize("case", EMBEDDING_CASES, ids=EMBEDDING_CASES.keys())
def test_embedding_lookup(case):
    shape, dtype, ids = EMBEDDING_CASES[case]
    model, feeds = one_op(
        "EMBEDDING_LOOKUP",
        [Const(ids), In(rand(shape, dtype))],
        [((len(ids),) + shape[1:], dtype)],
    )
    assert_matches_litert(model, feeds)


def test_embedding_lookup_int8_quantized_passes_through():
    model, feeds = one_op(
        "EMBEDDING_LOOKUP",
        [Const([1, 0, 1]), In(rand((3, 4), np.int8), Q8)],
        [((3, 4), np.int8, Q8)],
    )
    assert_matches_litert(model, feeds)


HYBRID_CASES = {
    "int8_per_tensor_v2": (np.int8, 0.25, 2),
    "uint8_per_tensor_bytes_read_as_int8_v1": (np.uint8, 0.5, 1),
    "int8_per_row_scales_v4": (np.int8, [0.5, 0.125, 2.0, 0.75, 0.01], 4),
    "uint8_per_row_scales_v4": (np.uint8, [1.5, 0.25, 0.5, 3.0, 0.1], 4),
}


@pytest.mark.parametrize("case", HYBRID_CASES, ids=HYBRID_CASES.keys())
def test_embedding_lookup_hybrid(case):
    """Quantized weights, float output: TFLite's hybrid kernel dequantizes the picked rows
    (symmetric: zero point 0; uint8 bytes are read as int8, values over 127 included)."""
    dtype, scale, version = HYBRID_CASES[case]
    weights = rand((5, 3), dtype)
    scales = np.asarray(scale, np.float32)
    quant = Quant(scales, np.zeros(scales.size, np.int64) if scales.ndim else 0, 0)
    model, feeds = one_op(
        "EMBEDDING_LOOKUP",
        [Const([3, 0, 4, 1]), Const(weights, dtype, quant)],
        [((4, 3), np.float32)],
        version=version,
    )
    assert_matches_litert(model, feeds)


def test_embedding_lookup_hybrid_float16_output():
    weights = rand((4, 3), np.int8)
    model, feeds = one_op(
        "EMBEDDING_LOOKUP",
        [Const([2, 0]), Const(weights, np.int8, Quant(0.125, 0))],
        [((2, 3), np.float16)],
    )
    assert_matches_litert(model, feeds)


def test_embedding_lookup_index_out_of_range_is_a_model_error():
    model, feeds = one_op(
        "EMBEDDING_LOOKUP", [Const([0, 3]), In(rand((3, 2)))], [((2, 2), np.float32)]
    )
    with pytest.raises(ModelError, match=r"EMBEDDING_LOOKUP.*embedding index 3 is out of range"):
        run_ours(model, feeds)


# -- EMBEDDING_LOOKUP_SPARSE -----------------------------------------------------------------

ELS_CASES = {
    "sum_2d": ("SUM", [[0, 0], [0, 1], [1, 0], [2, 0], [2, 1], [2, 2]], [3, 3], (6, 4)),
    "mean_2d": ("MEAN", [[0, 0], [0, 1], [1, 0], [2, 0], [2, 1], [2, 2]], [3, 3], (6, 4)),
    "sqrtn_2d": ("SQRTN", [[0, 0], [0, 1], [1, 0], [2, 0], [2, 1], [2, 2]], [3, 3], (6, 4)),
    "mean_3d_cells": ("MEAN", [[0, 0, 0], [0, 0, 1], [1, 1, 0], [1, 1, 1]], [2, 2, 2], (5, 2, 3)),
    "sum_empty_cell": ("SUM", [[0, 0], [2, 0], [2, 1]], [4, 2], (4, 3)),
}


@pytest.mark.parametrize("case", ELS_CASES, ids=ELS_CASES.keys())
def test_embedding_lookup_sparse(case):
    combiner, indices, dense_shape, value_shape = ELS_CASES[case]
    n = len(indices)
    ids = ints(0, value_shape[0], (n,))
    weights = RNG.uniform(0.2, 2.0, n).astype(np.float32)
    out_shape = tuple(dense_shape[:-1]) + value_shape[1:]
    model, feeds = one_op(
        "EMBEDDING_LOOKUP_SPARSE",
        [In(ids), Const(indices), Const(dense_shape), In(weights), In(rand(value_shape))],
        [(out_shape, np.float32)],
        combiner=combiner,
    )
    assert_matches_litert(model, feeds)


def test_embedding_lookup_sparse_bad_id_is_a_model_error():
    model, feeds = one_op(
        "EMBEDDING_LOOKUP_SPARSE",
        [
            In(np.array([0, 9], np.int32)),
            Const([[0, 0], [1, 0]]),
            Const([2, 1]),
            In(np.ones(2, np.float32)),
            In(rand((4, 2))),
        ],
        [((2, 2), np.float32)],
    )
    with pytest.raises(
        ModelError, match=r"EMBEDDING_LOOKUP_SPARSE.*embedding id 9 is out of range"
    ):
        run_ours(model, feeds)


# -- BUCKETIZE -------------------------------------------------------------------------------

BUCKETIZE_CASES = {
    "f32": (np.array([[-1.0, 0.0, 0.5], [2.5, 10.0, 3.0]], np.float32), [0.0, 0.5, 2.5, 3.5]),
    "f32_on_boundaries": (np.array([1.0, 2.0, 3.0, 0.99], np.float32), [1.0, 2.0, 3.0]),
    "int32": (np.array([-5, 0, 1, 2, 7, 100], np.int32), [0.5, 1.0, 6.9, 7.0]),
    "int64": (np.array([[3, -2], [8, 8]], np.int64), [-1.5, 3.0, 8.25]),
    "float64": (np.array([0.1, 0.2, 0.30000001], np.float64), [0.1, 0.2, 0.3]),
    "repeated_boundaries": (np.array([1.0, 2.0, 3.0], np.float32), [2.0, 2.0, 2.0]),
}


@pytest.mark.parametrize("case", BUCKETIZE_CASES, ids=BUCKETIZE_CASES.keys())
def test_bucketize(case):
    x, boundaries = BUCKETIZE_CASES[case]
    model, feeds = one_op("BUCKETIZE", [In(x)], [(x.shape, np.int32)], boundaries=boundaries)
    assert_matches_litert(model, feeds)


def test_bucketize_unsorted_boundaries_is_a_model_error():
    model, feeds = one_op("BUCKETIZE", [In(rand((3,)))], [((3,), np.int32)], boundaries=[1.0, 0.5])
    with pytest.raises(ModelError, match=r"BUCKETIZE.*not sorted"):
        run_ours(model, feeds)


# -- DILATE ----------------------------------------------------------------------------------

DILATE_CASES = {
    "vector": ((4,), [3], np.float32),
    "matrix": ((2, 3), [2, 3], np.float32),
    "matrix_rows_only": ((3, 2), [2, 1], np.float32),
    "rank3_trailing_ones": ((2, 2, 3), [3, 1, 1], np.int32),
    "rank4_middle": ((1, 3, 2, 2), [1, 2, 1, 2], np.int8),
    "no_dilation": ((2, 3), [1, 1], np.float32),
    "uint8": ((3, 3), [2, 2], np.uint8),
    "int64": ((2, 2), [1, 4], np.int64),
}


@pytest.mark.parametrize("case", DILATE_CASES, ids=DILATE_CASES.keys())
def test_dilate(case):
    shape, dilations, dtype = DILATE_CASES[case]
    out = tuple((d - 1) * f + 1 for d, f in zip(shape, dilations, strict=True))
    model, feeds = one_op(
        "DILATE",
        [In(rand(shape, dtype)), Const(dilations), Const(rand((), dtype), dtype)],
        [(out, dtype)],
    )
    assert_matches_litert(model, feeds)


def test_dilate_zero_dilation_is_a_model_error():
    model, feeds = one_op(
        "DILATE", [In(rand((2, 2))), Const([1, 0]), Const(0.0, np.float32)], [((2, 2), np.float32)]
    )
    with pytest.raises(ModelError, match=r"DILATE.*must be >= 1"):
        run_ours(model, feeds)
