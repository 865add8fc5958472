"""Reductions against LiteRT: float, integer, quantized MEAN/SUM, arg max/min, cumsum."""

from __future__ import annotations

import numpy as np
import pytest

from delegate_runtime.builder import ModelBuilder, Quant
from delegate_runtime.errors import ModelError
from tests.ops.conftest import BUILTIN, REFERENCE, assert_matches_litert, run_litert, run_ours

RNG_SEED = 5


def reduce_shape(shape: tuple, axes: list[int], keep: bool) -> tuple:
    rank = len(shape)
    resolved = {a % rank for a in axes}
    if keep:
        return tuple(1 if i in resolved else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in resolved)


def reduce_model(
    op: str,
    shape: tuple,
    axes: list[int],
    keep: bool,
    dtype: type = np.float32,
    qin: Quant | None = None,
    qout: Quant | None = None,
    version: int = 1,
) -> bytes:
    b = ModelBuilder()
    g = b.main
    x = g.input("x", shape, dtype, quant=qin)
    ax = g.const("axis", np.array(axes, np.int32))
    y = g.tensor("y", reduce_shape(shape, axes, keep), dtype, quant=qout)
    g.op(op, [x, ax], [y], version=version, keep_dims=keep)
    g.output(y)
    return b.build()


def random(shape: tuple, dtype: type) -> np.ndarray:
    rng = np.random.default_rng(RNG_SEED)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.random(shape) < 0.3
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo, hi = (int(info.min), int(info.max)) if dt.itemsize == 1 else (-1000, 1000)
        return rng.integers(lo, hi + 1, shape).astype(dt)
    return rng.standard_normal(shape).astype(dt)


AXES = [
    ((1, 6, 5, 4), [1, 2], True),
    ((1, 6, 5, 4), [1, 2], False),
    ((2, 3, 4), [0], False),
    ((2, 3, 4), [-1], True),
    ((2, 3, 4), [0, 2], False),
    ((2, 3, 4), [0, 1, 2], False),
    ((2, 3, 4), [2, -1], False),
    ((5,), [0], False),
    ((2, 3, 2, 2, 3), [1, 3], True),
]
AXES_IDS = [f"{s}-{a}-{'keep' if k else 'drop'}" for s, a, k in AXES]


@pytest.mark.parametrize("op", ["MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD"])
@pytest.mark.parametrize("shape,axes,keep", AXES, ids=AXES_IDS)
def test_float(op: str, shape: tuple, axes: list[int], keep: bool) -> None:
    model = reduce_model(op, shape, axes, keep)
    assert_matches_litert(model, [random(shape, np.float32)])


@pytest.mark.parametrize("op", ["MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer(op: str, dtype: type) -> None:
    x = random((2, 3, 4), dtype)
    if op == "REDUCE_PROD":
        x = x % 7 - 3
    assert_matches_litert(reduce_model(op, (2, 3, 4), [1], False, dtype), [x])


@pytest.mark.parametrize("op", ["REDUCE_ANY", "REDUCE_ALL"])
def test_bool(op: str) -> None:
    x = random((3, 4, 2), np.bool_)
    assert_matches_litert(reduce_model(op, (3, 4, 2), [1, 2], False, np.bool_), [x])


# -- quantized ----------------------------------------------------------------------------

I8, U8 = np.int8, np.uint8
Q_CASES = [
    # (op, dtype, shape, axes, keep, qin, qout)
    ("MEAN", I8, (1, 7, 7, 16), [1, 2], True, Quant(0.05, -3), Quant(0.02, 4)),
    ("MEAN", I8, (2, 4, 4, 8), [2, 1], True, Quant(0.05, -3), Quant(0.05, -3)),
    ("MEAN", U8, (1, 7, 7, 16), [1, 2], True, Quant(0.05, 120), Quant(0.02, 130)),
    ("MEAN", I8, (1, 7, 7, 16), [1, 2], False, Quant(0.05, -3), Quant(0.02, 4)),
    ("MEAN", I8, (2, 5, 6), [-1], False, Quant(0.05, -3), Quant(0.03, 10)),
    ("MEAN", U8, (2, 5, 6), [0, 2], True, Quant(0.05, 128), Quant(0.03, 120)),
    ("MEAN", I8, (2, 5, 6), [1], False, Quant(0.05, -3), Quant(0.05, -3)),
    ("SUM", I8, (2, 5, 6), [1], False, Quant(0.05, -3), Quant(0.4, 2)),
    ("SUM", U8, (2, 5, 6), [0, 2], True, Quant(0.02, 128), Quant(0.5, 100)),
    ("SUM", I8, (2, 5, 6), [1], False, Quant(0.05, -3), Quant(0.05, -3)),
    ("SUM", U8, (2, 5, 6), [1], False, Quant(0.05, 120), Quant(0.05, 120)),
    ("SUM", np.int16, (2, 5, 6), [1], False, Quant(0.05, 0), Quant(0.3, 0)),
    ("SUM", np.int16, (1, 7, 7, 16), [1, 2], True, Quant(0.05, 0), Quant(0.05, 0)),
    ("REDUCE_MAX", I8, (2, 5, 6), [1, 2], False, Quant(0.05, -3), Quant(0.05, -3)),
    ("REDUCE_MAX", U8, (1, 4, 4, 3), [1, 2], True, Quant(0.05, 100), Quant(0.05, 100)),
    ("REDUCE_MIN", I8, (2, 5, 6), [0], True, Quant(0.05, -3), Quant(0.05, -3)),
]
Q_IDS = [f"{c[0]}-{np.dtype(c[1]).name}-{c[2]}-{c[3]}-{i}" for i, c in enumerate(Q_CASES)]


@pytest.mark.parametrize("op,dtype,shape,axes,keep,qin,qout", Q_CASES, ids=Q_IDS)
def test_quantized(op, dtype, shape, axes, keep, qin, qout) -> None:
    model = reduce_model(op, shape, axes, keep, dtype, qin, qout, version=2)
    # LiteRT 2.3's reference SUM is wrong for int8 and int16 (all -1, or negative inputs
    # read as unsigned): quantized SUM answers to its builtin kernels.
    oracle = BUILTIN if op == "SUM" else REFERENCE
    assert_matches_litert(model, [random(shape, dtype)], oracle=oracle)


# -- arg max / min ------------------------------------------------------------------------

ARG_CASES = [
    ("ARG_MAX", np.float32, np.int64, 0),
    ("ARG_MAX", np.float32, np.int32, -1),
    ("ARG_MAX", np.int8, np.int64, 1),
    ("ARG_MAX", np.uint8, np.int32, 2),
    ("ARG_MAX", np.int32, np.int64, 1),
    ("ARG_MIN", np.float32, np.int64, 2),
    ("ARG_MIN", np.int32, np.int32, 0),
    ("ARG_MIN", np.uint8, np.int64, -2),
]


@pytest.mark.parametrize(
    "op,dtype,out_type,axis",
    ARG_CASES,
    ids=[f"{o}-{np.dtype(d).name}-{np.dtype(t).name}-{a}" for o, d, t, a in ARG_CASES],
)
def test_arg(op: str, dtype: type, out_type: type, axis: int) -> None:
    shape = (3, 4, 5)
    b = ModelBuilder()
    g = b.main
    x = g.input("x", shape, dtype)
    ax = g.const("axis", np.array([axis], np.int32))
    y = g.tensor("y", reduce_shape(shape, [axis], False), out_type)
    g.op(op, [x, ax], [y], version=2, output_type=np.dtype(out_type).name)
    g.output(y)
    assert_matches_litert(b.build(), [random(shape, dtype) // (3 if dtype != np.float32 else 1)])


# -- cumsum -------------------------------------------------------------------------------

CUMSUM_CASES = [
    (np.float32, 0, False, False),
    (np.float32, 1, True, False),
    (np.float32, -1, False, True),
    (np.float32, 2, True, True),
    (np.int32, 1, False, False),
    (np.int64, 0, True, True),
]


@pytest.mark.parametrize(
    "dtype,axis,exclusive,reverse",
    CUMSUM_CASES,
    ids=[f"{np.dtype(d).name}-{a}-ex{e:d}-rev{r:d}" for d, a, e, r in CUMSUM_CASES],
)
def test_cumsum(dtype: type, axis: int, exclusive: bool, reverse: bool) -> None:
    shape = (2, 3, 4)
    b = ModelBuilder()
    g = b.main
    x = g.input("x", shape, dtype)
    ax = g.const("axis", np.array(axis, np.int32))
    y = g.tensor("y", shape, dtype)
    g.op("CUMSUM", [x, ax], [y], exclusive=exclusive, reverse=reverse)
    g.output(y)
    assert_matches_litert(b.build(), [random(shape, dtype)])


# -- quantized MEAN, bit-exact with LiteRT's reference kernels ----------------------------

I16 = np.int16
MEAN_REF_CASES = [
    # (dtype, shape, axes, keep, qin, qout): global average pooling first, then the rest
    (I8, (1, 7, 7, 64), [1, 2], True, Quant(0.05, -3), Quant(0.02, 4)),
    (I8, (1, 7, 7, 64), [2, 1], True, Quant(0.0235, -128), Quant(0.0117, -10)),
    (I8, (2, 5, 3, 8), [1, 2], True, Quant(0.1, 10), Quant(0.1, 10)),
    (I8, (1, 8, 8, 16), [1, 2], True, Quant(0.003, 0), Quant(0.2, -100)),
    (I8, (1, 10, 10, 4), [1, 2], True, Quant(0.2, 5), Quant(0.004, 1)),
    (I8, (1, 1, 1, 8), [1, 2], True, Quant(0.05, -3), Quant(0.02, 4)),
    (I8, (1, 14, 14, 24), [1, 2], False, Quant(0.07, -20), Quant(0.03, 7)),
    (I8, (2, 5, 6), [-1], False, Quant(0.05, -3), Quant(0.03, 10)),
    (I8, (2, 5, 6, 3), [0, 3], True, Quant(0.05, 50), Quant(0.07, -50)),
    (U8, (1, 7, 7, 32), [1, 2], True, Quant(0.05, 120), Quant(0.02, 130)),
    (U8, (2, 9, 4, 8), [1, 2], True, Quant(0.01, 0), Quant(0.3, 255)),
    (U8, (2, 5, 6), [0, 2], False, Quant(0.05, 128), Quant(0.03, 120)),
    (I16, (1, 7, 7, 16), [1, 2], True, Quant(0.001, 0), Quant(0.0007, 0)),
    (I16, (3, 4, 5), [1], False, Quant(0.002, 0), Quant(0.003, 0)),
]
MEAN_REF_IDS = [
    f"{np.dtype(c[0]).name}-{c[1]}-{c[2]}-{'keep' if c[3] else 'drop'}-{i}"
    for i, c in enumerate(MEAN_REF_CASES)
]


@pytest.mark.parametrize("dtype,shape,axes,keep,qin,qout", MEAN_REF_CASES, ids=MEAN_REF_IDS)
def test_quantized_mean_bit_exact(dtype, shape, axes, keep, qin, qout) -> None:
    model = reduce_model("MEAN", shape, axes, keep, dtype, qin, qout, version=2)
    x = random(shape, dtype)
    (expected,) = run_litert(model, [x])  # BUILTIN_REF
    (got,) = run_ours(model, [x])
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def test_int16_mean_needs_zero_points_0() -> None:
    model = reduce_model("MEAN", (1, 4, 4, 2), [1, 2], True, I16, Quant(0.01, 3), Quant(0.01, 0))
    with pytest.raises(ModelError, match="int16 MEAN needs zero points 0"):
        run_ours(model, [random((1, 4, 4, 2), I16)])
