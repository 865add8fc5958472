"""GATHER and ONE_HOT on our GPU delegate in fp32 and fp16, against LiteRT's reference
kernels; and the conditions LiteRT's delegate refuses, refused by ours with TFLite's
reason.

Each model must be delegated whole. Runtime int32 indices are held as float values on the
GPU: every index here is below 2048, exact in fp16 storage, so a difference is the
delegate's, not the storage's rounding.
"""

from __future__ import annotations

import numpy as np
import pytest

from delegate_runtime import read_model
from delegate_runtime.gpu.opencl.records.gather import ONE_HOT_REFUSED
from delegate_runtime.gpu.support import supports
from tests.ops.oneop import Const, In, one_op
from tests.ops.test_gpu_beyond_vision import check_against_litert, integers, uniform
from tests.ops.test_gpu_ops import PRECISIONS, opencl_device  # noqa: F401  (the fixture)

pytestmark = pytest.mark.usefixtures("opencl_device")


def support(model: bytes) -> tuple[bool, str]:
    """Whether our delegate takes the model's one op, and why not."""
    sg = read_model(model).subgraphs[0]
    return supports(sg.operators[0], sg)


# -- GATHER -----------------------------------------------------------------------------------

#: case -> (params shape, axis, indices, whether the indices are constant); indices repeat
#: and run backwards
GATHER_CASES = {
    "const-axis0": ((4, 3, 2, 5), 0, (3, 0, 3, 1, 2), True),
    "const-axis1": ((2, 3, 4, 5), 1, (2, 2, 0), True),
    "const-axis2": ((2, 3, 4, 5), 2, (3, 1, 0, 1, 2, 3), True),
    "const-axis3": ((2, 3, 4, 5), 3, (4, 0), True),
    "const-axis-minus1-3d": ((3, 4, 6), -1, (5, 4, 3, 2, 1, 0, 0), True),
    "runtime-axis0": ((4, 3, 2, 5), 0, (1, 3, 3, 0), False),
    "runtime-axis1": ((2, 3, 4, 5), 1, (2, 0, 1, 2), False),
    "runtime-axis2": ((2, 3, 4, 5), 2, (0, 3), False),
    "runtime-axis3": ((2, 3, 4, 5), 3, (4, 3, 2, 1, 0, 4, 4), False),
    "runtime-2d": ((6, 7), 1, (6, 0, 5), False),
    "runtime-1d": ((9,), 0, (8, 2, 2, 7, 0), False),
    "runtime-one-index": ((3, 4, 5), 1, (2,), False),
}


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", GATHER_CASES)
def test_gather(case: str, precision: str) -> None:
    shape, axis, indices, constant = GATHER_CASES[case]
    params = uniform(f"gather_{case}", -3, 3, shape)
    idx = np.array(indices, np.int32)
    out = np.take(params, idx, axis=axis).shape
    index_arg = Const(idx, np.int32) if constant else In(idx)
    model, feeds = one_op("GATHER", [In(params), index_arg], [(out, np.float32)], axis=axis)
    check_against_litert(model, feeds, precision)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_gather_rows_of_a_constant_table(precision: str) -> None:
    """An embedding lookup: a constant table read at runtime indices."""
    table = uniform("gather_table", -3, 3, (10, 8))
    idx = np.array([9, 0, 4, 4, 7, 1], np.int32)
    model, feeds = one_op(
        "GATHER", [Const(table, np.float32), In(idx)], [((6, 8), np.float32)], axis=0
    )
    check_against_litert(model, feeds, precision)


def test_gather_2d_indices_are_refused_as_litert_does() -> None:
    params = np.zeros((4, 5), np.float32)
    idx = np.zeros((2, 3), np.int32)
    model, _ = one_op("GATHER", [In(params), Const(idx)], [((2, 3, 5), np.float32)], axis=0)
    assert support(model) == (False, "Only support 1D indices")


def test_gather_int64_indices_are_refused_as_litert_does() -> None:
    params = np.zeros((4, 5), np.float32)
    model, _ = one_op(
        "GATHER", [In(params), Const((1, 2), np.int64)], [((2, 5), np.float32)], axis=0
    )
    assert support(model) == (False, "Only accept INT32 indices")


def test_gather_v2_is_refused_as_litert_does() -> None:
    """LiteRT's GatherOperationParser takes version 1 (v2: int8 params)."""
    params = np.zeros((4, 5), np.int8)
    model, _ = one_op("GATHER", [In(params), Const((1, 2))], [((2, 5), np.int8)], version=2, axis=0)
    assert support(model) == (False, "Max version supported: 1. Requested version 2.")


# -- ONE_HOT ----------------------------------------------------------------------------------

#: case -> (indices, depth, axis, on, off); LiteRT takes the new axis last with one index
#: per batch ("last-axis-one-index-per-batch"), ours any axis and indices shape
ONE_HOT_CASES = {
    "last-axis-one-index-per-batch": (lambda: integers(1, 0, 6, (3, 1)), 7, -1, 1.0, 0.0),
    "last-axis-1d": (lambda: integers(2, 0, 6, (5,)), 7, -1, 1.0, 0.0),
    "last-axis-2d": (lambda: integers(3, 0, 3, (2, 3)), 4, -1, 2.5, -0.5),
    "last-axis-3d": (lambda: integers(4, 0, 4, (2, 3, 2)), 5, -1, 1.0, 0.0),
    "axis0": (lambda: integers(5, 0, 5, (3, 4)), 6, 0, 1.0, 0.0),
    "axis1-3d": (lambda: integers(6, 0, 3, (2, 3, 2)), 4, 1, 3.0, 1.0),
    "axis-equal-rank": (lambda: integers(7, 0, 8, (4, 2)), 9, 2, 1.0, 0.0),
    "out-of-range-off": (lambda: integers(8, -2, 6, (3, 5)), 4, -1, 1.0, -1.0),
}


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", ONE_HOT_CASES)
def test_one_hot(case: str, precision: str) -> None:
    make, depth, axis, on, off = ONE_HOT_CASES[case]
    idx = make().astype(np.int32)
    where = idx.ndim if axis == -1 else axis
    out = (*idx.shape[:where], depth, *idx.shape[where:])
    args = [In(idx), Const(np.int32(depth)), Const(on, np.float32), Const(off, np.float32)]
    model, feeds = one_op("ONE_HOT", args, [(out, np.float32)], axis=axis)
    check_against_litert(model, feeds, precision)


def test_one_hot_runtime_on_value_is_refused_as_litert_does() -> None:
    idx = np.zeros((3,), np.int32)
    on = np.ones((), np.float32)
    args = [In(idx), Const(np.int32(4)), In(on), Const(0.0, np.float32)]
    model, _ = one_op("ONE_HOT", args, [((3, 4), np.float32)], axis=-1)
    assert support(model) == (False, ONE_HOT_REFUSED)


def test_one_hot_vector_on_value_is_refused_as_litert_does() -> None:
    idx = np.zeros((3,), np.int32)
    args = [In(idx), Const(np.int32(4)), Const((1.0, 1.0), np.float32), Const(0.0, np.float32)]
    model, _ = one_op("ONE_HOT", args, [((3, 4), np.float32)], axis=-1)
    assert support(model) == (False, ONE_HOT_REFUSED)


def test_one_hot_int32_values_are_refused_as_litert_does() -> None:
    idx = np.zeros((3,), np.int32)
    args = [In(idx), Const(np.int32(4)), Const(1, np.int32), Const(0, np.int32)]
    model, _ = one_op("ONE_HOT", args, [((3, 4), np.int32)], axis=-1)
    assert support(model) == (False, ONE_HOT_REFUSED)
