"""QUANTIZE and DEQUANTIZE against LiteRT: per tensor, per channel, requantize, fp16."""

from __future__ import annotations

import numpy as np
import pytest

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder, Quant
from delegate_runtime.errors import ModelError
from delegate_runtime.interpreter import Interpreter
from tests.ops.conftest import assert_matches_litert

RNG_SEED = 3
SHAPE = (2, 4, 4, 3)
PER_CHANNEL = Quant(np.array([0.02, 0.05, 0.1], np.float32), np.array([0, 0, 0]), axis=3)


def one_op(
    op: str,
    in_dtype: type,
    out_dtype: type,
    qin: Quant | None,
    qout: Quant | None,
    version: int,
    const: np.ndarray | None = None,
) -> bytes:
    b = ModelBuilder()
    g = b.main
    if const is not None:
        x = g.const("x", const, quant=qin)
    else:
        x = g.input("x", SHAPE, in_dtype, quant=qin)
    y = g.tensor("y", SHAPE, out_dtype, quant=qout)
    g.op(op, [x], [y], version=version)
    g.output(y)
    return b.build()


def float_input() -> np.ndarray:
    x = np.random.default_rng(RNG_SEED).uniform(-8, 8, SHAPE).astype(np.float32)
    x.flat[:4] = [0.25, -0.25, 0.75, -0.75]  # exact ties at scale 0.5
    return x


def int_input(dtype: type) -> np.ndarray:
    info = np.iinfo(dtype)
    rng = np.random.default_rng(RNG_SEED)
    return rng.integers(int(info.min), int(info.max) + 1, SHAPE).astype(dtype)


QUANTIZE_CASES = [
    (np.int8, Quant(0.05, -3), 1),
    (np.uint8, Quant(0.07, 128), 1),
    (np.int8, Quant(0.5, 0), 1),
    (np.int16, Quant(0.001, 0), 3),
    (np.int8, PER_CHANNEL, 2),
]


@pytest.mark.parametrize(
    "dtype,qout,version",
    QUANTIZE_CASES,
    ids=[f"{np.dtype(d).name}-{i}" for i, (d, _, _) in enumerate(QUANTIZE_CASES)],
)
def test_quantize_float(dtype: type, qout: Quant, version: int) -> None:
    model = one_op("QUANTIZE", np.float32, dtype, None, qout, version)
    assert_matches_litert(model, [float_input()])


REQUANT_CASES = [
    (np.int8, np.uint8, Quant(0.05, -3), Quant(0.05, 125)),
    (np.uint8, np.int8, Quant(0.05, 128), Quant(0.05, 0)),
    (np.int8, np.int8, Quant(0.05, -3), Quant(0.08, 10)),
    (np.uint8, np.uint8, Quant(0.03, 100), Quant(0.02, 120)),
    (np.int8, np.uint8, Quant(0.05, 0), Quant(0.11, 128)),
]


@pytest.mark.parametrize(
    "in_dtype,out_dtype,qin,qout",
    REQUANT_CASES,
    ids=[
        f"{np.dtype(a).name}-{np.dtype(b).name}-{i}" for i, (a, b, _, _) in enumerate(REQUANT_CASES)
    ],
)
def test_requantize(in_dtype: type, out_dtype: type, qin: Quant, qout: Quant) -> None:
    model = one_op("QUANTIZE", in_dtype, out_dtype, qin, qout, 2)
    assert_matches_litert(model, [int_input(in_dtype)])


DEQUANTIZE_CASES = [
    (np.int8, Quant(0.05, -3), 2),
    (np.uint8, Quant(0.07, 128), 1),
    (np.int16, Quant(0.001, 0), 4),
    (np.int8, PER_CHANNEL, 4),
]


@pytest.mark.parametrize(
    "dtype,qin,version",
    DEQUANTIZE_CASES,
    ids=[f"{np.dtype(d).name}-{i}" for i, (d, _, _) in enumerate(DEQUANTIZE_CASES)],
)
def test_dequantize(dtype: type, qin: Quant, version: int) -> None:
    model = one_op("DEQUANTIZE", dtype, np.float32, qin, None, version)
    assert_matches_litert(model, [int_input(dtype)], rtol=0, atol=0)


@pytest.mark.parametrize("dtype,qin", [(np.float16, None), (np.int8, PER_CHANNEL)])
def test_dequantize_constant(dtype: type, qin: Quant | None) -> None:
    """Constant weights as converters store them (fp16 or int8), dequantized then used."""
    data = float_input().astype(dtype) if dtype == np.float16 else int_input(dtype)
    b = ModelBuilder()
    g = b.main
    w = g.const("w", data, quant=qin)
    wf = g.tensor("wf", SHAPE)
    x = g.input("x", SHAPE)
    y = g.tensor("y", SHAPE)
    g.op("DEQUANTIZE", [w], [wf], version=3)
    g.op("ADD", [x, wf], [y])
    g.output(y)
    assert_matches_litert(b.build(), [float_input()], rtol=0, atol=0)


def test_dequantize_unsupported_type() -> None:
    model = one_op("DEQUANTIZE", np.int32, np.float32, Quant(0.1, 0), None, 1)
    with pytest.raises(ModelError, match=r"DEQUANTIZE.*int32"):
        Interpreter(read_model(model)).invoke([np.ones(SHAPE, np.int32)])
