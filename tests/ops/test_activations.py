"""Activations and unary math against LiteRT: float32 and int8/uint8 quantized."""

from __future__ import annotations

import numpy as np
import pytest

from delegate_runtime import litert, read_model
from delegate_runtime.builder import ModelBuilder, Quant
from delegate_runtime.errors import ModelError
from delegate_runtime.interpreter import Interpreter
from tests.conftest import require
from tests.ops.conftest import assert_matches_litert, run_ours

RNG_SEED = 11
SHAPE = (2, 5, 7)


def unary_model(
    op: str,
    shape: tuple = SHAPE,
    dtype: type = np.float32,
    qin: Quant | None = None,
    qout: Quant | None = None,
    version: int = 1,
    out_dtype: type | None = None,
    **options,
) -> bytes:
    b = ModelBuilder()
    g = b.main
    x = g.input("x", shape, dtype, quant=qin)
    y = g.tensor("y", shape, out_dtype or dtype, quant=qout)
    g.op(op, [x], [y], version=version, **options)
    g.output(y)
    return b.build()


def float_input(shape: tuple = SHAPE, lo: float = -6, hi: float = 6) -> np.ndarray:
    return np.random.default_rng(RNG_SEED).uniform(lo, hi, shape).astype(np.float32)


def full_range(dtype: type, shape: tuple = (2, 128)) -> np.ndarray:
    """Every value of an 8-bit type (and a shuffled copy), so lookup tables are fully checked."""
    info = np.iinfo(dtype)
    values = np.arange(int(info.min), int(info.max) + 1, dtype=np.int64)
    flat = np.concatenate([values, np.random.default_rng(RNG_SEED).permutation(values)])
    return flat[: int(np.prod(shape))].reshape(shape).astype(dtype)


# -- float32 ------------------------------------------------------------------------------

FLOAT_OPS = [
    ("RELU", {}),
    ("RELU6", {}),
    ("RELU_N1_TO_1", {}),
    ("RELU_0_TO_1", {}),
    ("LOGISTIC", {}),
    ("TANH", {}),
    ("HARD_SWISH", {}),
    ("ELU", {}),
    ("GELU", {}),
    ("GELU", {"approximate": True}),
    ("LEAKY_RELU", {"alpha": 0.15}),
    ("SOFTMAX", {"beta": 1.0}),
    ("SOFTMAX", {"beta": 0.37}),
    ("LOG_SOFTMAX", {}),
    ("EXP", {}),
    ("SIN", {}),
    ("COS", {}),
    ("SQUARE", {}),
    ("NEG", {}),
    ("ABS", {}),
]


@pytest.mark.parametrize(
    "op,options", FLOAT_OPS, ids=[f"{o}-{'-'.join(map(str, k.values()))}" for o, k in FLOAT_OPS]
)
def test_float(op: str, options: dict) -> None:
    assert_matches_litert(unary_model(op, **options), [float_input()])


@pytest.mark.parametrize("op", ["LOG", "SQRT", "RSQRT"])
def test_float_positive_domain(op: str) -> None:
    assert_matches_litert(unary_model(op), [float_input(lo=0.01, hi=20)])


@pytest.mark.parametrize("shape", [(10,), (3, 10), (2, 3, 4, 10), (1, 2, 1, 3, 5)])
def test_softmax_ranks(shape: tuple) -> None:
    assert_matches_litert(unary_model("SOFTMAX", shape, beta=1.0), [float_input(shape)])


@pytest.mark.parametrize("op,dtype", [("NEG", np.int32), ("NEG", np.int64), ("ABS", np.int32)])
def test_integer(op: str, dtype: type) -> None:
    x = np.random.default_rng(RNG_SEED).integers(-100, 100, SHAPE).astype(dtype)
    assert_matches_litert(unary_model(op, dtype=dtype), [x])


def test_prelu_float_broadcast_alpha() -> None:
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 4, 4, 3))
    alpha = g.const("alpha", np.array([[[0.1, -0.5, 2.0]]], np.float32))
    y = g.tensor("y", (1, 4, 4, 3))
    g.op("PRELU", [x, alpha], [y])
    g.output(y)
    assert_matches_litert(b.build(), [float_input((1, 4, 4, 3))])


# -- quantized ----------------------------------------------------------------------------

I8, U8 = np.int8, np.uint8
Q_IN = {I8: Quant(0.05, -10), U8: Quant(0.04, 120)}
Q_OTHER = {I8: Quant(0.03, 5), U8: Quant(0.06, 100)}
#: Fixed output quantization TFLite requires: (int8, uint8).
FIXED_OUT = {
    "LOGISTIC": {I8: Quant(1 / 256, -128), U8: Quant(1 / 256, 0)},
    "SOFTMAX": {I8: Quant(1 / 256, -128), U8: Quant(1 / 256, 0)},
    "TANH": {I8: Quant(1 / 128, 0), U8: Quant(1 / 128, 128)},
    "LOG_SOFTMAX": {I8: Quant(16 / 256, 127), U8: Quant(16 / 256, 255)},
}
QUANT_OPS = [
    ("RELU", 2, {}),
    ("RELU6", 2, {}),
    ("RELU_N1_TO_1", 1, {}),
    ("LOGISTIC", 2, {}),
    ("TANH", 2, {}),
    ("HARD_SWISH", 1, {}),
    ("LEAKY_RELU", 2, {"alpha": 0.2}),
    ("SOFTMAX", 2, {"beta": 1.0}),
    ("SOFTMAX", 2, {"beta": 0.5}),
    ("EXP", 2, {}),
    ("ELU", 1, {}),
    ("GELU", 1, {}),
    ("LOG_SOFTMAX", 2, {}),
    ("ABS", 2, {}),
]
#: Ops TFLite has no uint8 kernel for (LiteRT refuses them at invoke); our runtime refuses
#: them too (test_uint8_refused).
NO_UINT8 = ("EXP", "ELU", "ABS", "LOG", "RSQRT")
QUANT_CASES = [
    (op, v, o, dt) for op, v, o in QUANT_OPS for dt in (I8, U8) if not (dt == U8 and op in NO_UINT8)
]


def quant_unary_model(op: str, version: int, options: dict, dtype: type) -> bytes:
    qout = FIXED_OUT.get(op, Q_OTHER)[dtype]
    if op in ("ELU", "GELU", "EXP"):
        qout = Quant(0.08, -20) if dtype == I8 else Quant(0.08, 20)
    return unary_model(op, (2, 128), dtype, Q_IN[dtype], qout, version, **options)


@pytest.mark.parametrize(
    "op,version,options,dtype",
    QUANT_CASES,
    ids=[f"{o}-{np.dtype(d).name}-{'-'.join(map(str, k.values()))}" for o, _, k, d in QUANT_CASES],
)
def test_quantized(op: str, version: int, options: dict, dtype: type) -> None:
    model = quant_unary_model(op, version, options, dtype)
    assert_matches_litert(model, [full_range(dtype)])


@pytest.mark.parametrize("op", NO_UINT8)
def test_uint8_refused(op: str) -> None:
    """TFLite has no uint8 kernel for these ops: LiteRT refuses the model, and so do we, with
    a ModelError naming the op and the type."""
    model = unary_model(op, (2, 128), U8, Q_IN[U8], Q_OTHER[U8], 1 if op == "ELU" else 2)
    with pytest.raises(ModelError, match=rf"{op}.*uint8"):
        run_ours(model, [full_range(U8)])
    require(litert.available(), "ai-edge-litert (the LiteRT oracle)")
    with pytest.raises((RuntimeError, ValueError)):
        litert.run(model, [full_range(U8)], xnnpack=False)


#: Quantization pairs over a range of input/output scale ratios, for the fixed-point
#: HARD_SWISH and the GELU tables: (input, output) per type.
SCALE_PAIRS = [
    (Quant(0.1, 3), Quant(0.05, -10)),
    (Quant(0.02, 0), Quant(0.03, 5)),
    (Quant(0.5, 1), Quant(0.2, 0)),
    (Quant(0.004, 0), Quant(0.5, 0)),
]
SCALED_CASES = [
    (op, opts, dt, qi, qo)
    for op, opts in [("HARD_SWISH", {}), ("GELU", {}), ("GELU", {"approximate": True})]
    for dt in (I8, U8)
    for qi, qo in SCALE_PAIRS
]


@pytest.mark.parametrize(
    "op,options,dtype,qin,qout",
    SCALED_CASES,
    ids=[
        f"{o}{'-approx' if k else ''}-{np.dtype(d).name}-{qi.scale}-{qo.scale}"
        for o, k, d, qi, qo in SCALED_CASES
    ],
)
def test_quantized_scales(op: str, options: dict, dtype: type, qin: Quant, qout: Quant) -> None:
    shift = 128 if dtype == U8 else 0
    qin, qout = Quant(qin.scale, qin.zero_point + shift), Quant(qout.scale, qout.zero_point + shift)
    model = unary_model(op, (2, 128), dtype, qin, qout, 1, **options)
    assert_matches_litert(model, [full_range(dtype)])


@pytest.mark.parametrize("dtype", [I8, U8])
def test_prelu_quantized(dtype: type) -> None:
    zp = -3 if dtype == I8 else 130
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (2, 4, 4, 8), dtype, quant=Quant(0.05, zp))
    alpha = np.arange(8).astype(dtype) + (0 if dtype == U8 else -4)
    a = g.const("alpha", alpha.reshape(1, 1, 8), quant=Quant(0.03, 2))
    y = g.tensor("y", (2, 4, 4, 8), dtype, quant=Quant(0.07, zp + 5))
    g.op("PRELU", [x, a], [y])
    g.output(y)
    assert_matches_litert(b.build(), [full_range(dtype, (2, 4, 4, 8))])


@pytest.mark.parametrize("shape", [(1, 10), (2, 3, 17)])
def test_softmax_quantized_int8_ranks(shape: tuple) -> None:
    x = np.random.default_rng(RNG_SEED).integers(-128, 128, shape).astype(I8)
    model = unary_model("SOFTMAX", shape, I8, Quant(0.1, 3), Quant(1 / 256, -128), 2, beta=1.0)
    assert_matches_litert(model, [x])


def test_unsupported_dtype_names_op_and_type() -> None:
    model = unary_model("SOFTMAX", (2, 3), np.int32, beta=1.0)
    with pytest.raises(ModelError, match=r"SOFTMAX.*int32"):
        Interpreter(read_model(model)).invoke([np.ones((2, 3), np.int32)])


@pytest.mark.parametrize("op", ["RSQRT", "LOG"])
def test_quantized_positive_domain_int8(op: str) -> None:
    model = unary_model(op, (2, 128), I8, Quant(0.05, -128), Quant(0.03, -100), 2)
    assert_matches_litert(model, [full_range(I8)])
