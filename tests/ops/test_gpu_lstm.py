"""The basic LSTM (v2) on the GPU delegate against the reference interpreter and LiteRT."""

from __future__ import annotations

import io

import numpy as np
import pytest

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder
from delegate_runtime.interpreter import Interpreter
from tests.conftest import require, require_module
from tests.ops.conftest import run_litert

require_module("pyopencl", "pyopencl (the GPU delegate's OpenCL binding)")

#: max |gpu - reference| per precision, relative to the output's magnitude
TOLERANCE = {"fp32": 1e-5, "fp16": 2e-2}


@pytest.fixture(scope="module")
def opencl() -> None:
    from delegate_runtime.gpu.opencl.runtime import list_devices

    require(bool(list_devices()), "an OpenCL device (a GPU driver or PoCL)")


def basic_lstm_model(batch: int, inputs: int, units: int, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    b = ModelBuilder()
    g = b.main
    x, h, c = (
        g.input("x", (batch, inputs)),
        g.input("h", (batch, units)),
        g.input("c", (batch, units)),
    )
    w = g.const("w", rng.standard_normal((4 * units, inputs + units)).astype(np.float32) * 0.5)
    bias = g.const("b", rng.standard_normal(4 * units).astype(np.float32) * 0.5)
    outs = [
        g.tensor("h_out", (batch, units)),
        g.tensor("c_out", (batch, units)),
        g.tensor("concat", (batch, inputs + units)),
        g.tensor("gates", (batch, 4 * units)),
    ]
    g.op(
        "LSTM",
        [x, h, w, bias, c],
        outs,
        version=2,
        kernel_type="BASIC",
        fused_activation_function="TANH",
        cell_clip=0.0,
        proj_clip=0.0,
    )
    g.output(outs[0], outs[1])
    return b.build()


def lstm_inputs(batch: int, inputs: int, units: int) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    shapes = [(batch, inputs), (batch, units), (batch, units)]
    return [rng.uniform(-1, 1, s).astype(np.float32) for s in shapes]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("batch,inputs,units", [(1, 4, 3), (2, 5, 3), (3, 16, 32), (1, 64, 128)])
def test_basic_lstm_on_gpu(
    opencl: None, precision: str, batch: int, inputs: int, units: int
) -> None:
    from delegate_runtime.gpu.delegate import GpuSession

    model = read_model(basic_lstm_model(batch, inputs, units))
    ins = lstm_inputs(batch, inputs, units)
    session = GpuSession(model, precision=precision, log=io.StringIO())
    assert session.delegation.fully_delegated
    expected = Interpreter(model).invoke(ins)
    for got, want in zip(session.invoke(ins), expected, strict=True):
        scale = max(float(np.abs(want).max()), 1.0)
        assert float(np.abs(got - want).max()) <= TOLERANCE[precision] * scale


def test_basic_lstm_reference_matches_litert() -> None:
    data = basic_lstm_model(2, 5, 3)
    ins = lstm_inputs(2, 5, 3)
    for got, want in zip(
        Interpreter(read_model(data)).invoke(ins), run_litert(data, ins), strict=True
    ):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_full_lstm_stays_on_the_cpu_with_a_reason() -> None:
    from delegate_runtime.gpu.partition import partition
    from delegate_runtime.gpu.support import SupportOptions

    model = read_model(basic_lstm_model(1, 4, 3))
    model.main.operators[0].options["kernel_type"] = 0
    summary = partition(model.main, SupportOptions())
    assert summary.delegated_nodes == 0
    assert summary.unsupported[0].reason == "Only the basic LSTM kernel is supported."
