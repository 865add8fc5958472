"""SUM, REDUCE_MAX, REDUCE_MIN, REDUCE_PROD and CUMSUM on the GPU delegate in fp32 and fp16,
against LiteRT's reference kernels; their support checks against LiteRT's refusals.

Each model must be delegated whole, and each case names the kernel that must run it
(`reduce4d`, one item per output, or `reduce4d_wide`, a work group per output). Both
accumulate in float whatever the storage: a long channel SUM in fp16 storage, which a
half accumulator gets 75 % wrong (the test shows it), comes out right. REDUCE_PROD's
inputs stay near 1 so that the product is well inside fp16's range.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest

from delegate_runtime import read_model
from delegate_runtime.builder import Quant
from delegate_runtime.gpu.opencl.specialize import generic_name
from delegate_runtime.gpu.support import TYPE_SHAPE, supports
from tests.ops.conftest import BUILTIN, REFERENCE, run_litert
from tests.ops.oneop import Const, In, one_op
from tests.ops.test_gpu_beyond_vision import uniform
from tests.ops.test_gpu_ops import (  # noqa: F401  (opencl_device: the fixture)
    PRECISIONS,
    TOL,
    assert_close,
    opencl_device,
)

F = np.float32


def run_session(
    model: bytes, xs: list[np.ndarray], precision: str, **options: Any
) -> tuple[list, set[str]]:
    """Our outputs through the delegate (every node delegated) and the kernels it ran;
    `options`: GpuSession's."""
    from delegate_runtime.gpu.delegate import GpuSession

    session = GpuSession(read_model(model), precision=precision, log=io.StringIO(), **options)
    d = session.delegation
    assert d.delegated_nodes == d.total_nodes, f"not fully delegated: {d.to_dict()}"
    kernels = {generic_name(k[0].function_name) for ex in session.executors for k in ex.kernels}
    return session.invoke(list(xs)), kernels


def check(model: bytes, xs: list[np.ndarray], precision: str, kernel: str) -> None:
    """Within the precision's tolerance of LiteRT's reference kernels, run by `kernel`."""
    want = run_litert(model, xs)
    got, kernels = run_session(model, xs, precision)
    assert kernel in kernels, f"{kernel} did not run: {sorted(kernels)}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert_close(g, w, TOL[precision], f"output {i}")


def node(model: bytes):
    """A one-op model's node and subgraph, for `supports`."""
    sg = read_model(model, validate=False).main
    return sg.operators[0], sg


def reduced_shape(shape: tuple, axes: list[int], keep_dims: bool) -> tuple:
    rank = len(shape)
    reduced = {a % rank for a in axes}
    if keep_dims:
        return tuple(1 if i in reduced else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in reduced)


# -- reductions --------------------------------------------------------------------------------

#: op -> its input's range (PROD near 1: a product of hundreds stays within fp16)
RANGES = {"SUM": (-1, 1), "REDUCE_MAX": (-3, 3), "REDUCE_MIN": (-3, 3), "REDUCE_PROD": (0.85, 1.15)}
#: case -> (input shape, axes, keep_dims, kernel)
SHAPES = {
    "channels": ((1, 4, 5, 6), [3], False, "reduce4d"),
    "hw-keep": ((1, 4, 5, 6), [1, 2], True, "reduce4d"),
    "batch-and-channels-apart": ((2, 3, 4, 5), [0, 3], False, "reduce4d"),
    "height-and-channels-apart-keep": ((2, 3, 4, 5), [1, 3], True, "reduce4d"),
    "all-to-scalar": ((2, 3, 4, 5), [0, 1, 2, 3], False, "reduce4d"),
    "negative-and-repeated-axes": ((3, 4, 5), [-1, 2, 0], False, "reduce4d"),
    "rank2-rows": ((6, 40), [0], False, "reduce4d"),
    "rank1-keep": ((7,), [0], True, "reduce4d"),
    "wide-hw": ((2, 24, 24, 8), [1, 2], False, "reduce4d_wide"),
    "wide-channels-keep": ((1, 3, 2, 300), [-1], True, "reduce4d_wide"),
    "wide-batch-h-w-apart-from-channels": ((4, 9, 9, 3), [0, 1, 2], False, "reduce4d_wide"),
}
OPS = tuple(RANGES)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", SHAPES)
@pytest.mark.parametrize("op", OPS)
def test_reduction(op: str, case: str, precision: str) -> None:
    shape, axes, keep_dims, kernel = SHAPES[case]
    x = uniform(f"{op}-{case}", *RANGES[op], shape)
    out = reduced_shape(shape, axes, keep_dims)
    model, feeds = one_op(
        op, [In(x), Const(np.array(axes, np.int32))], [(out, F)], keep_dims=keep_dims
    )
    check(model, feeds, precision, kernel)


@pytest.mark.parametrize("op", OPS)
def test_reduction_over_no_axes_copies_its_input(op: str) -> None:
    x = uniform(f"{op}-none", *RANGES[op], (1, 3, 4, 5))
    model, feeds = one_op(op, [In(x), Const(np.zeros(0, np.int32))], [(x.shape, F)])
    check(model, feeds, "fp32", "reduce4d")


def half_accumulated_sum(x: np.ndarray) -> np.ndarray:
    """The sum over the last axis as a kernel accumulating in half would compute it."""
    acc = np.zeros(x.shape[:-1], np.float16)
    for v in np.moveaxis(x.astype(np.float16), -1, 0):
        acc = (acc + v).astype(np.float16)
    return acc.astype(F)


def test_long_channel_sum_in_fp16_accumulates_in_float() -> None:
    """16384 channels of 0.25..0.75: a half accumulator stops at 2048 (its step there is 2,
    every addend under half a step), 75 % short of the 8192 LiteRT's reference gives."""
    x = uniform("long-sum", 0.25, 0.75, (1, 1, 2, 16384))
    model, feeds = one_op("SUM", [In(x), Const(np.array([3], np.int32))], [((1, 1, 2), F)])
    want = run_litert(model, feeds)[0]
    half = half_accumulated_sum(x)
    assert np.abs(half - want).max() > 0.7 * np.abs(want).max()  # the case discriminates
    got, kernels = run_session(model, feeds, "fp16")
    assert "reduce4d_wide" in kernels
    assert_close(got[0], want, TOL["fp16"], "sum")


def test_sum_of_a_long_row_by_one_item_in_fp16_accumulates_in_float() -> None:
    """255 channels of 8.4 by one work item (reduce4d): a half accumulator loses 0.4 at
    each step past 1024, 2 % short of 2142."""
    x = np.full((1, 2, 3, 255), 8.4, F)
    model, feeds = one_op("SUM", [In(x), Const(np.array([3], np.int32))], [((1, 2, 3), F)])
    want = run_litert(model, feeds)[0]
    assert np.abs(half_accumulated_sum(x) - want).max() > TOL["fp16"] * np.abs(want).max()
    got, kernels = run_session(model, feeds, "fp16")
    assert "reduce4d" in kernels
    assert_close(got[0], want, TOL["fp16"], "sum")


#: op -> LiteRT's kernels to compare with (its reference SUM misreads negative int8 inputs:
#: delegate_runtime/ops/reduce.py); int8 REDUCE_PROD (v2) is below, alone
QUANTIZED = {"SUM": BUILTIN, "REDUCE_MAX": REFERENCE, "REDUCE_MIN": REFERENCE}
Q_IN = Quant(0.02, -3)
#: op -> the output's grid (SUM: sums of six values of -2.5..2.6; MAX and MIN: TFLite
#: requires the input's)
Q_OUT = {"SUM": Quant(0.1, 2), "REDUCE_MAX": Q_IN, "REDUCE_MIN": Q_IN}


@pytest.mark.parametrize("op", QUANTIZED)
def test_int8_reduction_within_a_step(op: str) -> None:
    """The float view of an int8 model (inputs dequantized, the result snapped to the
    output's grid) within one step of LiteRT's integer kernels."""
    rng = np.random.default_rng(len(op))
    x = rng.integers(-128, 128, (1, 4, 5, 6)).astype(np.int8)
    out = (1, 4, 5)
    model, feeds = one_op(
        op,
        [In(x, Q_IN), Const(np.array([3], np.int32))],
        [(out, np.int8, Q_OUT[op])],
        version=2,
    )
    want = run_litert(model, feeds, QUANTIZED[op])[0]
    got, _ = run_session(model, feeds, "fp32")
    assert got[0].dtype == np.int8 and got[0].shape == want.shape
    steps = np.abs(got[0].astype(np.int32) - want.astype(np.int32))
    assert steps.max() <= 1, f"{steps.max()} steps off"


def test_int8_reduce_prod_is_taken_as_litert_takes_it() -> None:
    """REDUCE_PROD v2 (int8) passes the support check, as in LiteRT; it lowers as the
    int8 reductions above do, but our reference interpreter has no kernel for it, so the
    runtime refuses such a model before any delegate sees it."""
    q = Quant(0.02, -3)
    x = np.zeros((1, 4, 5, 6), np.int8)
    model = one_op(
        "REDUCE_PROD",
        [In(x, q), Const(np.array([3], np.int32))],
        [((1, 4, 5), np.int8, Quant(0.04, -100))],
        version=2,
    )[0]
    assert supports(*node(model)) == (True, "")


# -- CUMSUM ------------------------------------------------------------------------------------

#: case -> (input shape, axis, exclusive, reverse)
CUMSUM = {
    "channels": ((1, 4, 5, 6), 3, False, False),
    "height": ((1, 4, 5, 6), 1, False, False),
    "batch": ((3, 2, 4, 5), 0, False, False),
    "negative-axis": ((2, 5, 7), -2, False, False),
    "exclusive": ((1, 4, 5, 6), 2, True, False),
    "reverse": ((1, 4, 5, 6), 3, False, True),
    "exclusive-reverse": ((2, 3, 6), 1, True, True),
    "rank1": ((9,), 0, False, False),
    "rank2-rows": ((5, 8), 0, True, False),
}


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", CUMSUM)
def test_cumsum(case: str, precision: str) -> None:
    shape, axis, exclusive, reverse = CUMSUM[case]
    x = uniform(f"cumsum-{case}", -1, 1, shape)
    model, feeds = one_op(
        "CUMSUM",
        [In(x), Const(np.array(axis, np.int32))],
        [(shape, F)],
        exclusive=exclusive,
        reverse=reverse,
    )
    check(model, feeds, precision, "cumsum_axis")


def test_long_cumsum_in_fp16_accumulates_in_float() -> None:
    """4096 steps of 0.5..1 along the channels: a half running sum stops at 2048 (its step
    there is 2, every addend under half a step), a third short of the end."""
    x = uniform("long-cumsum", 0.5, 1.0, (1, 1, 2, 4096))
    model, feeds = one_op("CUMSUM", [In(x), Const(np.array(3, np.int32))], [(x.shape, F)])
    want = run_litert(model, feeds)[0]
    assert np.abs(half_accumulated_sum(x) - want[..., -1]).max() > 0.2 * np.abs(want).max()
    got, _ = run_session(model, feeds, "fp16")
    assert_close(got[0], want, TOL["fp16"], "cumsum")


# -- what LiteRT refuses -------------------------------------------------------------------------


X = np.zeros((1, 4, 5, 6), F)


def reduction_model(op: str, case: str) -> bytes:
    if case == "runtime-axes":
        axes = np.array([3], np.int32)
        return one_op(op, [In(X), In(axes)], [((1, 4, 5), F)])[0]
    if case == "int64-axes":
        return one_op(op, [In(X), Const(np.array([3], np.int64), np.int64)], [((1, 4, 5), F)])[0]
    if case == "constant-input":
        return one_op(op, [Const(X, F), Const(np.array([3], np.int32))], [((1, 4, 5), F)])[0]
    raise ValueError(case)


#: case -> LiteRT's reason ({op}: the op's name)
REDUCTION_REFUSALS = {
    # an int32 runtime tensor: the type rule refuses it first, in LiteRT as here
    "runtime-axes": TYPE_SHAPE,
    "int64-axes": "{op} supports int32 tensor for axes. But node has INT64",
    "constant-input": "Expected 1 const input tensor(s), but node has 2 const input(s).",
}


@pytest.mark.parametrize("case", REDUCTION_REFUSALS)
@pytest.mark.parametrize("op", OPS)
def test_reduction_refuses_as_litert(op: str, case: str) -> None:
    assert supports(*node(reduction_model(op, case))) == (
        False,
        REDUCTION_REFUSALS[case].format(op=op),
    )


def test_reduction_of_int16_version_3_is_refused_by_type() -> None:
    """REDUCE_MAX v3 (int16): LiteRT's parser checks no version; the types refuse it."""
    x = np.zeros((1, 4, 5, 6), np.int16)
    model = one_op(
        "REDUCE_MAX",
        [In(x, Quant(0.01, 0)), Const(np.array([3], np.int32))],
        [((1, 4, 5), np.int16, Quant(0.01, 0))],
        version=3,
    )[0]
    assert supports(*node(model)) == (False, TYPE_SHAPE)


CUMSUM_REFUSED = "Input/output must be float type and indices must be constant int32 type"


def cumsum_model(case: str) -> bytes:
    if case == "runtime-axis":
        return one_op("CUMSUM", [In(X), In(np.array(3, np.int32))], [(X.shape, F)])[0]
    if case == "int64-axis":
        return one_op("CUMSUM", [In(X), Const(np.array(3, np.int64), np.int64)], [(X.shape, F)])[0]
    if case == "int8-input":
        x, q = X.astype(np.int8), Quant(0.1, 0)
        return one_op("CUMSUM", [In(x, q), Const(np.array(3))], [(X.shape, np.int8, q)])[0]
    if case == "version-2":
        return one_op("CUMSUM", [In(X), Const(np.array(3))], [(X.shape, F)], version=2)[0]
    raise ValueError(case)


CUMSUM_REFUSALS = {
    "runtime-axis": TYPE_SHAPE,  # an int32 runtime tensor, refused by type first
    "int64-axis": CUMSUM_REFUSED,
    "int8-input": CUMSUM_REFUSED,
    "version-2": "Max version supported: 1. Requested version 2.",
}


@pytest.mark.parametrize("case", CUMSUM_REFUSALS)
def test_cumsum_refuses_as_litert(case: str) -> None:
    assert supports(*node(cumsum_model(case))) == (False, CUMSUM_REFUSALS[case])
