"""SELECT, SELECT_V2 and WHERE against LiteRT (resource variables: test_control_flow)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_matches_litert, run_ours

from delegate_runtime.builder import ModelBuilder

RNG = np.random.default_rng(0)


def build_select(
    op: str, cond_shape: tuple, x_shape: tuple, y_shape: tuple, out_shape: tuple, dtype: type
) -> bytes:
    b = ModelBuilder()
    g = b.main
    c = g.input("cond", cond_shape, np.bool_)
    x, y = g.input("x", x_shape, dtype), g.input("y", y_shape, dtype)
    z = g.tensor("z", out_shape, dtype)
    g.op(op, [c, x, y], [z])
    g.output(z)
    return b.build()


def _values(shape: tuple, dtype: type) -> np.ndarray:
    return RNG.integers(-50, 50, shape).astype(dtype)


SELECT_CASES = {
    "select_same_shape_f32": ("SELECT", (2, 3), (2, 3), (2, 3), (2, 3), np.float32),
    "select_rows_by_vector": ("SELECT", (2,), (2, 3), (2, 3), (2, 3), np.float32),
    "select_int32": ("SELECT", (4,), (4,), (4,), (4,), np.int32),
    "select_v2_broadcast_cond": ("SELECT_V2", (1, 3), (2, 3), (2, 3), (2, 3), np.float32),
    "select_v2_broadcast_all": (
        "SELECT_V2",
        (2, 1, 1),
        (1, 3, 1),
        (1, 1, 4),
        (2, 3, 4),
        np.float32,
    ),
    "select_v2_scalar_y": ("SELECT_V2", (2, 2), (2, 2), (), (2, 2), np.int8),
}


@pytest.mark.parametrize("case", SELECT_CASES, ids=SELECT_CASES.keys())
def test_select(case: str) -> None:
    op, cs, xs, ys, out, dtype = SELECT_CASES[case]
    cond = RNG.integers(0, 2, cs).astype(np.bool_)
    model = build_select(op, cs, xs, ys, out, dtype)
    assert_matches_litert(model, [cond, _values(xs, dtype), _values(ys, dtype)])


WHERE_CASES = {
    "bool_2d": ((3, 4), np.bool_),
    "bool_1d": ((5,), np.bool_),
    "float_3d": ((2, 3, 2), np.float32),
}


def build_where(shape: tuple, dtype: type) -> bytes:
    b = ModelBuilder()
    g = b.main
    x = g.input("x", shape, dtype)
    coords = g.tensor("coords", (int(np.prod(shape)), len(shape)), np.int64)
    g.op("WHERE", [x], [coords])
    g.output(coords)
    return b.build()


@pytest.mark.parametrize("case", WHERE_CASES, ids=WHERE_CASES.keys())
def test_where(case: str) -> None:
    shape, dtype = WHERE_CASES[case]
    values = RNG.integers(0, 2, shape).astype(dtype)
    assert_matches_litert(build_where(shape, dtype), [values])


def test_where_nothing_true_gives_no_rows() -> None:
    """LiteRT's Python API cannot return an empty tensor, so this one is ours alone."""
    out = run_ours(build_where((5,), np.bool_), [np.zeros(5, np.bool_)])[0]
    assert out.shape == (0, 1) and out.dtype == np.int64
