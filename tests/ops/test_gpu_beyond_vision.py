"""The ops LiteRT's GPU delegate took after the seed documents' era (model_builder.cc's
parsers: comparisons, SELECT_V2, CAST, ABS ... LEAKY_RELU, POW, FLOOR_DIV, FLOOR_MOD),
on our GPU delegate in fp32 and fp16, against LiteRT's reference kernels.

Each model must be delegated whole. Inputs are chosen where the op is well-conditioned in
fp16 storage (integer values where an op has ties or steps, such as comparisons, FLOOR and
FLOOR_DIV), so a difference is the delegate's, not the storage's rounding.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder
from tests.ops.conftest import run_litert
from tests.ops.oneop import Const, In, one_op
from tests.ops.test_gpu_ops import (  # noqa: F401  (opencl_device: the fixture)
    PRECISIONS,
    TOL,
    assert_close,
    opencl_device,
    run_gpu,
)

pytestmark = pytest.mark.usefixtures("opencl_device")

SHAPE = (1, 4, 5, 6)


def uniform(key: str, low: float, high: float, shape: tuple = SHAPE) -> np.ndarray:
    rng = np.random.default_rng(zlib.crc32(key.encode()))
    return rng.uniform(low, high, shape).astype(np.float32)


def integers(seed: int, low: int, high: int, shape: tuple = SHAPE) -> np.ndarray:
    """Integer-valued floats: exact in fp16, with ties between operands."""
    rng = np.random.default_rng(seed)
    return rng.integers(low, high + 1, shape).astype(np.float32)


def away_from_integers(seed: int, shape: tuple = SHAPE) -> np.ndarray:
    """k + f with f in [0.1, 0.9]: FLOOR's step is never within fp16's rounding."""
    rng = np.random.default_rng(seed)
    k = rng.integers(-4, 4, shape)
    return (k + rng.uniform(0.1, 0.9, shape)).astype(np.float32)


def check_against_litert(model: bytes, xs: list[np.ndarray], precision: str) -> None:
    want = run_litert(model, xs)
    got = run_gpu(read_model(model), xs, precision)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if w.dtype == np.bool_:
            assert g.dtype == np.bool_ and g.shape == w.shape, f"output {i}"
            np.testing.assert_array_equal(g, w, err_msg=f"output {i}")
        else:
            assert_close(g, w, TOL[precision], f"output {i}")


# -- unary ------------------------------------------------------------------------------------

#: op -> (its input, its options)
UNARY = {
    "ABS": (lambda: uniform("abs", -3, 3), {}),
    "NEG": (lambda: uniform("neg", -3, 3), {}),
    "SIN": (lambda: uniform("sin", -3, 3), {}),
    "COS": (lambda: uniform("cos", -3, 3), {}),
    "LOG": (lambda: uniform("log", 0.1, 5), {}),
    "FLOOR": (lambda: away_from_integers(1), {}),
    "SIGN": (lambda: integers(2, -2, 2), {}),
    "SQUARE": (lambda: uniform("square", -3, 3), {}),
    "ELU": (lambda: uniform("elu", -3, 3), {}),
    "RELU_N1_TO_1": (lambda: uniform("relu1", -3, 3), {}),
    "RELU_0_TO_1": (lambda: uniform("relu01", -3, 3), {}),
    "LEAKY_RELU": (lambda: uniform("leaky", -3, 3), {"alpha": 0.3}),
    "GELU": (lambda: uniform("gelu", -3, 3), {"approximate": False}),
    "GELU-approximate": (lambda: uniform("gelu_tanh", -3, 3), {"approximate": True}),
}


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", UNARY)
def test_unary(case: str, precision: str) -> None:
    make, options = UNARY[case]
    x = make()
    model, feeds = one_op(case.split("-")[0], [In(x)], [(x.shape, np.float32)], **options)
    check_against_litert(model, feeds, precision)


# -- binary -----------------------------------------------------------------------------------

#: op -> (a, b): runtime inputs, b broadcast along the channels where it is 1-D
BINARY = {
    "POW": (lambda: uniform("pow_a", 0.5, 2), lambda: uniform("pow_b", -2, 2)),
    "POW-channel": (lambda: uniform("pow_c", 0.5, 2), lambda: uniform("pow_d", -2, 2, (6,))),
    "FLOOR_DIV": (lambda: integers(3, -20, 20), lambda: integers(4, 1, 6)),
    "FLOOR_DIV-negative": (lambda: integers(5, -20, 20), lambda: integers(6, -6, -1)),
    "FLOOR_MOD": (lambda: integers(7, -20, 20), lambda: integers(8, 1, 6)),
    "FLOOR_MOD-negative": (lambda: integers(9, -20, 20), lambda: integers(10, -6, -1)),
    "FLOOR_MOD-fractional": (
        lambda: away_from_integers(11),
        lambda: np.full((6,), 0.75, np.float32),
    ),
}


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", BINARY)
def test_binary(case: str, precision: str) -> None:
    make_a, make_b = BINARY[case]
    a, b = make_a(), make_b()
    out = np.broadcast_shapes(a.shape, b.shape)
    model, feeds = one_op(case.split("-")[0], [In(a), In(b)], [(out, np.float32)])
    check_against_litert(model, feeds, precision)


COMPARISONS = ("EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL")


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("op", COMPARISONS)
def test_comparison_output_is_bool(op: str, precision: str) -> None:
    a, b = integers(12, -2, 2), integers(13, -2, 2, (6,))
    model, feeds = one_op(op, [In(a), In(b)], [(SHAPE, np.bool_)])
    check_against_litert(model, feeds, precision)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_comparison_against_a_constant(precision: str) -> None:
    a = integers(14, -3, 3)
    model, feeds = one_op(
        "GREATER", [In(a), Const(np.float32(0.0), np.float32)], [(SHAPE, np.bool_)]
    )
    check_against_litert(model, feeds, precision)


# -- select and cast ----------------------------------------------------------------------------

#: case -> (op, cond shape, x shape, y shape); SELECT (v1) takes equal shapes only
SELECT_CASES = {
    "select-same": ("SELECT", (1, 4, 5, 6), (1, 4, 5, 6), (1, 4, 5, 6)),
    "select_v2-same": ("SELECT_V2", (1, 4, 5, 6), (1, 4, 5, 6), (1, 4, 5, 6)),
    "select_v2-cond-per-channel": ("SELECT_V2", (6,), (1, 4, 5, 6), (1, 4, 5, 6)),
    "select_v2-scalar-else": ("SELECT_V2", (1, 4, 5, 6), (1, 4, 5, 6), ()),
    "select_v2-all-broadcast": ("SELECT_V2", (2, 1, 1), (1, 3, 1), (1, 1, 4)),
}


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", SELECT_CASES)
def test_select(case: str, precision: str) -> None:
    op, cs, xs, ys = SELECT_CASES[case]
    rng = np.random.default_rng(15)
    cond = rng.random(cs) > 0.5
    x, y = uniform("sel_x", -3, 3, xs), uniform("sel_y", -3, 3, ys)
    out = np.broadcast_shapes(cs, xs, ys)
    model, feeds = one_op(op, [In(cond), In(x), In(y)], [(out, np.float32)])
    check_against_litert(model, feeds, precision)


def comparison_select_cast_model() -> bytes:
    """x > 0 picks x or y (SELECT_V2), and (x > 0) as float scales y: the bool tensors stay
    inside the partition, as LiteRT's delegate wants them."""
    b = ModelBuilder()
    g = b.main
    x, y = g.input("x", SHAPE), g.input("y", SHAPE)
    zero = g.const("zero", np.float32(0.0))
    mask = g.tensor("mask", SHAPE, np.bool_)
    g.op("GREATER", [x, zero], [mask])
    picked = g.tensor("picked", SHAPE)
    g.op("SELECT_V2", [mask, x, y], [picked])
    as_float = g.tensor("as_float", SHAPE)
    g.op("CAST", [mask], [as_float])
    scaled = g.tensor("scaled", SHAPE)
    g.op("MUL", [as_float, y], [scaled])
    g.output(picked, scaled)
    return b.build()


@pytest.mark.parametrize("precision", PRECISIONS)
def test_comparison_select_and_cast_in_one_partition(precision: str) -> None:
    xs = [uniform("chain_x", -3, 3), uniform("chain_y", -3, 3)]
    check_against_litert(comparison_select_cast_model(), xs, precision)


#: (input dtype, output dtype, input)
CASTS = {
    "float-to-int32": (np.float32, np.int32, lambda: uniform("cast_fi", -50, 50)),
    "int32-to-float": (np.int32, np.float32, lambda: integers(16, -1000, 1000).astype(np.int32)),
    "float-to-bool": (np.float32, np.bool_, lambda: integers(17, -1, 1)),
    "bool-to-float": (np.bool_, np.float32, lambda: integers(18, 0, 1) > 0),
}


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", CASTS)
def test_cast(case: str, precision: str) -> None:
    src, dst, make = CASTS[case]
    x = make().astype(src)
    if precision == "fp16" and case == "float-to-int32":
        x = np.round(x * 8) / 8  # fp16 keeps 1/8 steps below 64: truncation is exact
    model, feeds = one_op("CAST", [In(x)], [(x.shape, dst)])
    check_against_litert(model, feeds, precision)


def test_cast_from_int8_stays_on_the_cpu() -> None:
    from delegate_runtime.gpu.support import supports

    x = np.zeros(SHAPE, np.int8)
    model = read_model(one_op("CAST", [In(x)], [(SHAPE, np.float32)])[0])
    ok, why = supports(model.subgraphs[0].operators[0], model.subgraphs[0])
    assert not ok
    assert why.startswith("Not supported Cast case") or "tensor type" in why


# -- reshapes by other names, and broadcasts LiteRT's rule never bound ---------------------------


def reshapes_model() -> bytes:
    """x [4, 5, 6] -> EXPAND_DIMS(axis 0) -> MEAN over H, W -> SQUEEZE(dims 1, 2) ->
    SQUEEZE(all) -> MUL: the converter's `tf.expand_dims` / `tf.squeeze` around real work."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (4, 5, 6))
    y = g.tensor("y", (1, 4, 5, 6))
    g.op("EXPAND_DIMS", [x, g.const("axis", np.array([0], np.int32))], [y])
    m = g.tensor("m", (1, 1, 1, 6))
    g.op("MEAN", [y, g.const("hw", np.array([1, 2], np.int32))], [m], keep_dims=True)
    z = g.tensor("z", (1, 6))
    g.op("SQUEEZE", [m], [z], squeeze_dims=[1, 2])
    s = g.tensor("s", (6,))
    g.op("SQUEEZE", [z], [s])
    w = g.tensor("w", (6,))
    g.op("MUL", [s, g.const("k", np.full((6,), 3.0, np.float32))], [w])
    g.output(w)
    return b.build()


@pytest.mark.parametrize("precision", PRECISIONS)
def test_expand_dims_and_squeeze_stay_in_the_partition(precision: str) -> None:
    check_against_litert(reshapes_model(), [uniform("reshapes", -3, 3, (4, 5, 6))], precision)


#: (op, a shape, b shape): runtime operands LiteRT's old [b, c] rule refused
WIDE_BROADCASTS = {
    "maximum-runtime-scalar": ("MAXIMUM", (1, 1, 5, 32), ()),
    "sub-column": ("SUB", (1, 4, 5, 6), (1, 4, 5, 1)),
    "div-row": ("DIV", (2, 5, 6), (1, 1, 6)),
}


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", WIDE_BROADCASTS)
def test_any_numpy_broadcast(case: str, precision: str) -> None:
    op, sa, sb = WIDE_BROADCASTS[case]
    a = uniform(f"{case}a", -3, 3, sa)
    b = uniform(f"{case}b", 0.5, 3, sb)
    model, feeds = one_op(op, [In(a), In(b)], [(np.broadcast_shapes(sa, sb), np.float32)])
    check_against_litert(model, feeds, precision)
