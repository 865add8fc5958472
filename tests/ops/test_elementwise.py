"""Element-wise binary ops against LiteRT: float, integer and quantized, with broadcasting."""

from __future__ import annotations

import numpy as np
import pytest

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder, Quant
from delegate_runtime.errors import ModelError
from delegate_runtime.interpreter import Interpreter
from tests.ops.conftest import assert_matches_litert

RNG_SEED = 7
COMPARISONS = ("LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL")


def random_input(rng: np.random.Generator, shape: tuple, dtype: type) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo, hi = (
            (max(int(info.min), -50), min(int(info.max), 50))
            if dt.itemsize > 2
            else (
                int(info.min),
                int(info.max),
            )
        )
        return rng.integers(lo, hi + 1, size=shape).astype(dt)
    return rng.standard_normal(shape).astype(dt) * 3


def binary_model(
    op: str,
    a_shape: tuple,
    b_shape: tuple,
    dtype: type = np.float32,
    out_dtype: type | None = None,
    quants: tuple | None = None,
    version: int = 1,
    const_b: np.ndarray | None = None,
    **options,
) -> bytes:
    """One binary op; `quants` = (a, b, out) Quant or None."""
    qa, qb, qo = quants or (None, None, None)
    b = ModelBuilder()
    g = b.main
    x = g.input("a", a_shape, dtype, quant=qa)
    y = (
        g.const("b", const_b, quant=qb)
        if const_b is not None
        else g.input("b", b_shape, dtype, quant=qb)
    )
    out_shape = np.broadcast_shapes(a_shape, b_shape)
    z = g.tensor("out", out_shape, out_dtype or dtype, quant=qo)
    g.op(op, [x, y], [z], version=version, **options)
    g.output(z)
    return b.build()


def check_binary(model: bytes, a_shape: tuple, b_shape: tuple | None, dtype: type, **kw) -> None:
    rng = np.random.default_rng(RNG_SEED)
    inputs = [random_input(rng, a_shape, dtype)]
    if b_shape is not None:
        inputs.append(random_input(rng, b_shape, dtype))
    assert_matches_litert(model, inputs, **kw)


# -- float arithmetic, every broadcast pattern --------------------------------------------

BROADCASTS = [
    ((2, 3), (2, 3)),
    ((1, 4, 4, 3), (3,)),
    ((1, 4, 4, 3), (1, 1, 1, 3)),
    ((2, 1, 4, 3), (1, 5, 1, 3)),
    ((3,), (2, 4, 3)),
    ((), (2, 3)),
    ((2, 3, 1, 2, 2), (1, 3, 4, 1, 2)),
    ((1, 2, 1, 3, 1, 2), (2, 1, 2, 1, 2, 1)),
    ((4, 1), (1, 5)),
]


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM"])
@pytest.mark.parametrize("shapes", BROADCASTS, ids=[f"{a}x{b}" for a, b in BROADCASTS])
def test_float_broadcast(op: str, shapes: tuple) -> None:
    a, b = shapes
    check_binary(binary_model(op, a, b), a, b, np.float32)


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL", "DIV"])
@pytest.mark.parametrize("act", ["RELU", "RELU6", "RELU_N1_TO_1", "TANH"])
def test_float_fused_activation(op: str, act: str) -> None:
    model = binary_model(op, (1, 3, 3, 4), (4,), fused_activation_function=act)
    check_binary(model, (1, 3, 3, 4), (4,), np.float32)


@pytest.mark.parametrize("op", ["SQUARED_DIFFERENCE", "POW", "FLOOR_DIV", "FLOOR_MOD"])
def test_float_other(op: str) -> None:
    rng = np.random.default_rng(RNG_SEED)
    a = rng.uniform(0.5, 4, (2, 3, 4)).astype(np.float32)
    b = rng.uniform(-3, 3, (3, 4)).astype(np.float32)
    assert_matches_litert(binary_model(op, a.shape, b.shape), [a, b])


def test_add_constant_operand() -> None:
    const = np.arange(6, dtype=np.float32).reshape(2, 3)
    model = binary_model("ADD", (4, 2, 3), (2, 3), const_b=const)
    check_binary(model, (4, 2, 3), None, np.float32)


# -- integer arithmetic -------------------------------------------------------------------

INT_CASES = [
    ("ADD", np.int32, 1),
    ("ADD", np.int64, 4),
    ("SUB", np.int32, 1),
    ("SUB", np.int64, 4),
    ("MUL", np.int32, 1),
    ("MUL", np.int64, 5),
    ("DIV", np.int32, 1),
    ("MAXIMUM", np.int32, 1),
    ("MINIMUM", np.int64, 1),
    ("SQUARED_DIFFERENCE", np.int32, 1),
    ("FLOOR_DIV", np.int32, 2),
    ("FLOOR_MOD", np.int32, 1),
    ("FLOOR_MOD", np.int64, 2),
    ("POW", np.int32, 1),
]


@pytest.mark.parametrize(
    "op,dtype,version", INT_CASES, ids=[f"{o}-{np.dtype(d).name}" for o, d, _ in INT_CASES]
)
def test_integer(op: str, dtype: type, version: int) -> None:
    rng = np.random.default_rng(RNG_SEED)
    a = rng.integers(-40, 40, (2, 3, 4)).astype(dtype)
    b = rng.integers(1, 9, (3, 4)).astype(dtype) * rng.choice([-1, 1], (3, 4)).astype(dtype)
    if op == "POW":
        a, b = a % 5, np.abs(b) % 4
    assert_matches_litert(binary_model(op, a.shape, b.shape, dtype, version=version), [a, b])


def test_int32_add_relu6() -> None:
    model = binary_model("ADD", (2, 5), (5,), np.int32, fused_activation_function="RELU6")
    check_binary(model, (2, 5), (5,), np.int32)


def test_add_n() -> None:
    b = ModelBuilder()
    g = b.main
    xs = [g.input(f"x{i}", (2, 3, 4)) for i in range(4)]
    y = g.tensor("y", (2, 3, 4))
    g.op("ADD_N", xs, [y])
    g.output(y)
    rng = np.random.default_rng(RNG_SEED)
    assert_matches_litert(
        b.build(), [rng.standard_normal((2, 3, 4)).astype(np.float32) for _ in xs]
    )


# -- quantized arithmetic -----------------------------------------------------------------

Q_I8 = (Quant(0.05, 3), Quant(0.11, -7), Quant(0.13, 5))
Q_U8 = (Quant(0.05, 128), Quant(0.02, 100), Quant(0.07, 120))
Q_SAME_I8 = (Quant(0.1, -2), Quant(0.1, -2), Quant(0.1, -2))
QUANT_CASES = [
    ("ADD", np.int8, Q_I8, "NONE", (1, 4, 4, 3), (3,)),
    ("ADD", np.uint8, Q_U8, "NONE", (2, 5), (2, 5)),
    ("ADD", np.int8, Q_I8, "RELU6", (2, 3, 4), (1, 3, 1)),
    ("ADD", np.uint8, Q_U8, "RELU", (2, 1, 4), (3, 1)),
    ("SUB", np.int8, Q_I8, "NONE", (1, 4, 4, 3), (1, 1, 1, 3)),
    ("SUB", np.uint8, Q_U8, "RELU_N1_TO_1", (2, 5), (5,)),
    ("MUL", np.int8, Q_I8, "NONE", (2, 3, 4), (4,)),
    ("MUL", np.uint8, Q_U8, "NONE", (2, 3, 4), (2, 3, 4)),
    ("MUL", np.int8, Q_I8, "RELU", (3, 1, 4), (1, 2, 1)),
    ("MAXIMUM", np.int8, Q_SAME_I8, "NONE", (2, 3, 4), (4,)),
    ("MINIMUM", np.uint8, (Quant(0.1, 7),) * 3, "NONE", (2, 3), (2, 3)),
    (
        "SQUARED_DIFFERENCE",
        np.int8,
        (Quant(0.05, 3), Quant(0.04, -7), Quant(0.3, -128)),
        "NONE",
        (2, 3, 4),
        (4,),
    ),
]


@pytest.mark.parametrize(
    "op,dtype,quants,act,a_shape,b_shape",
    QUANT_CASES,
    ids=[f"{c[0]}-{np.dtype(c[1]).name}-{c[3]}-{i}" for i, c in enumerate(QUANT_CASES)],
)
def test_quantized(op, dtype, quants, act, a_shape, b_shape) -> None:
    opts = (
        {}
        if op in ("MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE")
        else {"fused_activation_function": act}
    )
    version = 2
    model = binary_model(op, a_shape, b_shape, dtype, quants=quants, version=version, **opts)
    check_binary(model, a_shape, b_shape, dtype)


def test_quantized_mul_multiplier_in_float32() -> None:
    """TFLite's Prepare forms MUL's multiplier s1 * s2 / s_out in float32: with these scales
    (a squeeze-excite gate of an int8 MobileNetV3) the double-precision multiplier differs,
    and two of the 65536 products below land a step apart. Every pair of int8 values."""
    quants = (
        Quant(0.033794112503528595, -128),
        Quant(0.0025211633183062077, -128),
        Quant(0.017972402274608612, -128),
    )
    model = binary_model("MUL", (256, 1), (1, 256), np.int8, quants=quants, version=2)
    values = np.arange(-128, 128).astype(np.int8)
    assert_matches_litert(model, [values.reshape(256, 1), values.reshape(1, 256)])


def test_quantized_add_int16_general_scale() -> None:
    quants = (Quant(0.001, 0), Quant(0.0007, 0), Quant(0.0013, 0))
    model = binary_model(
        "ADD", (2, 8), (8,), np.int16, quants=quants, version=3, pot_scale_int16=False
    )
    check_binary(model, (2, 8), (8,), np.int16)


# -- comparisons and logic ----------------------------------------------------------------


@pytest.mark.parametrize("op", COMPARISONS)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
def test_compare(op: str, dtype: type) -> None:
    model = binary_model(op, (2, 3, 4), (3, 1), dtype, out_dtype=np.bool_)
    check_binary(model, (2, 3, 4), (3, 1), dtype)


@pytest.mark.parametrize("op", COMPARISONS)
@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_compare_quantized(op: str, dtype: type) -> None:
    zp = 0 if dtype == np.uint8 else -3
    quants = (Quant(0.05, zp), Quant(0.07, zp + 10), None)
    model = binary_model(op, (4, 8), (8,), dtype, out_dtype=np.bool_, quants=quants, version=2)
    check_binary(model, (4, 8), (8,), dtype)


@pytest.mark.parametrize("op", ["EQUAL", "NOT_EQUAL", "LOGICAL_AND", "LOGICAL_OR"])
def test_bool(op: str) -> None:
    check_binary(binary_model(op, (3, 4), (4,), np.bool_), (3, 4), (4,), np.bool_)


def test_logical_not() -> None:
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (3, 4), np.bool_)
    y = g.tensor("y", (3, 4), np.bool_)
    g.op("LOGICAL_NOT", [x], [y])
    g.output(y)
    check_binary(b.build(), (3, 4), None, np.bool_)


# -- errors -------------------------------------------------------------------------------


def test_unsupported_dtype_names_op_and_type() -> None:
    model = binary_model("DIV", (2, 3), (2, 3), np.int64)
    x = np.ones((2, 3), np.int64)
    with pytest.raises(ModelError, match=r"DIV.*int64"):
        Interpreter(read_model(model)).invoke([x, x])
