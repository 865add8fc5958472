"""GPU delegate on quantized models (the float view) against the numpy reference.

float -> QUANTIZE -> int8/uint8 op -> DEQUANTIZE -> float, and int8 in/out models whose
inputs are dequantized and outputs quantized on the CPU. The GPU snaps every quantized
tensor to its grid; the reference computes in integers, so results agree within a step
or two of the output's scale.
"""

from __future__ import annotations

import io

import numpy as np
import pytest

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder, Quant
from delegate_runtime.interpreter import Interpreter
from tests.conftest import require_module
from tests.ops.test_gpu_ops import PRECISIONS, TOL, opencl_device, rng_for

require_module("pyopencl", "pyopencl (the GPU delegate's OpenCL binding)")

__all__ = ["opencl_device"]  # the fixture, re-exported for this module's tests

SHAPE = (1, 6, 7, 8)
Q_IN = {np.int8: Quant(0.02, -5), np.uint8: Quant(0.02, 123)}
Q_MID = {np.int8: Quant(0.05, 3), np.uint8: Quant(0.05, 131)}
#: Allowed error in output quantization steps (float view vs integer arithmetic, fp16).
STEPS = 2.0


def _weights(key: str, shape: tuple[int, ...], dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng_for(key, shape).integers(int(info.min) + 1, int(info.max), shape).astype(dtype)


def _core_op(g, name: str, x: int, dtype, q_out: Quant) -> tuple[int, float]:
    """Add one quantized op reading `x` (SHAPE); returns its output and output scale."""
    if name == "ADD":
        other = g.const("k", _weights("add", SHAPE, dtype), quant=Q_IN[dtype])
        y = g.tensor("y", SHAPE, dtype, quant=q_out)
        g.op("ADD", [x, other], [y], version=2, fused_activation_function="RELU6")
    elif name == "MUL":
        other = g.const(
            "k", _weights("mul", (8,), dtype), quant=Quant(0.01, Q_IN[dtype].zero_point)
        )
        y = g.tensor("y", SHAPE, dtype, quant=q_out)
        g.op("MUL", [x, other], [y], version=2)
    elif name == "CONV_2D":
        w = g.const("w", _weights("conv", (4, 3, 3, 8), np.int8), quant=Quant(0.01, 0))
        bias = g.const("b", np.arange(4, dtype=np.int32) * 10, quant=Quant(0.02 * 0.01, 0))
        y = g.tensor("y", (1, 6, 7, 4), dtype, quant=q_out)
        g.op(
            "CONV_2D",
            [x, w, bias],
            [y],
            version=3,
            padding="SAME",
            stride_h=1,
            stride_w=1,
            fused_activation_function="RELU",
        )
    elif name == "CONV_2D_PER_CHANNEL":
        scales = np.array([0.01, 0.02, 0.005, 0.015], np.float32)
        w = g.const("w", _weights("pc", (4, 1, 1, 8), np.int8), quant=Quant(scales, 0, axis=0))
        bias = g.const("b", np.zeros(4, np.int32), quant=Quant(scales * 0.02, 0, axis=0))
        y = g.tensor("y", (1, 6, 7, 4), dtype, quant=q_out)
        g.op("CONV_2D", [x, w, bias], [y], version=3, padding="SAME", stride_h=1, stride_w=1)
    elif name == "DEPTHWISE_CONV_2D":
        w = g.const("w", _weights("dw", (1, 3, 3, 8), np.int8), quant=Quant(0.02, 0))
        bias = g.const("b", np.zeros(8, np.int32), quant=Quant(0.02 * 0.02, 0))
        y = g.tensor("y", (1, 3, 4, 8), dtype, quant=q_out)
        g.op(
            "DEPTHWISE_CONV_2D",
            [x, w, bias],
            [y],
            version=3,
            padding="SAME",
            stride_h=2,
            stride_w=2,
            depth_multiplier=1,
        )
    elif name == "FULLY_CONNECTED":
        flat = g.tensor("flat", (1, 336), dtype, quant=Q_IN[dtype])
        g.op("RESHAPE", [x, g.const("s", np.int32([1, 336]))], [flat])
        w = g.const("w", _weights("fc", (10, 336), np.int8), quant=Quant(0.002, 0))
        y = g.tensor("y", (1, 10), dtype, quant=q_out)
        g.op("FULLY_CONNECTED", [flat, w], [y], version=4)
    elif name == "AVERAGE_POOL_2D":
        y = g.tensor("y", (1, 3, 4, 8), dtype, quant=Q_IN[dtype])
        g.op(
            "AVERAGE_POOL_2D",
            [x],
            [y],
            version=2,
            padding="SAME",
            filter_height=2,
            filter_width=2,
            stride_h=2,
            stride_w=2,
        )
        return y, Q_IN[dtype].scale
    elif name == "CONCATENATION":
        y = g.tensor("y", (1, 6, 7, 16), dtype, quant=Q_IN[dtype])
        g.op("CONCATENATION", [x, x], [y], version=2, axis=3)
        return y, Q_IN[dtype].scale
    else:
        raise AssertionError(name)
    return y, q_out.scale


#: uint8 convolutions need uint8 weights: int8 covers their lowering.
UINT8_OPS = ("ADD", "MUL", "FULLY_CONNECTED", "AVERAGE_POOL_2D", "CONCATENATION")
CORE_OPS = (
    "ADD",
    "MUL",
    "CONV_2D",
    "CONV_2D_PER_CHANNEL",
    "DEPTHWISE_CONV_2D",
    "FULLY_CONNECTED",
    "AVERAGE_POOL_2D",
    "CONCATENATION",
)


def float_wrapped(name: str, dtype) -> tuple[bytes, float]:
    """float -> QUANTIZE -> op -> DEQUANTIZE -> float."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", SHAPE, np.float32)
    xq = g.tensor("xq", SHAPE, dtype, quant=Q_IN[dtype])
    g.op("QUANTIZE", [x], [xq], version=2 if dtype == np.int8 else 1)
    y, scale = _core_op(g, name, xq, dtype, Q_MID[dtype])
    out = g.tensor("out", g.tensors[y].shape, np.float32)
    g.op("DEQUANTIZE", [y], [out], version=2 if dtype == np.int8 else 1)
    g.output(out)
    return b.build(), scale


def int8_io(name: str) -> tuple[bytes, float]:
    """int8 in, int8 out: the delegate (de)quantizes at the boundary on the CPU."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", SHAPE, np.int8, quant=Q_IN[np.int8])
    y, scale = _core_op(g, name, x, np.int8, Q_MID[np.int8])
    g.output(y)
    return b.build(), scale


def _compare(model_bytes: bytes, xs: list[np.ndarray], precision: str, scale: float) -> None:
    from delegate_runtime.gpu.delegate import GpuSession

    model = read_model(model_bytes)
    want = Interpreter(model).invoke(xs)[0]
    session = GpuSession(model, precision=precision, log=io.StringIO())
    d = session.delegation
    assert d.delegated_nodes == d.total_nodes, d.to_dict()
    got = session.invoke(xs)[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind in "iu":
        steps = np.abs(got.astype(np.int64) - want.astype(np.int64))
        assert steps.max() <= STEPS, f"off by {steps.max()} steps"
    else:
        mag = max(float(np.abs(want).max()), 1.0)
        np.testing.assert_allclose(got, want, rtol=0, atol=STEPS * scale + TOL[precision] * mag)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(
    "name,dtype",
    [pytest.param(n, np.int8, id=f"{n}-int8") for n in CORE_OPS]
    + [pytest.param(n, np.uint8, id=f"{n}-uint8") for n in UINT8_OPS],
)
def test_quantized_float_view(opencl_device, name, dtype, precision):
    data, scale = float_wrapped(name, dtype)
    x = rng_for(name).uniform(-2.0, 2.0, SHAPE).astype(np.float32)
    _compare(data, [x], precision, scale)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("name", ("ADD", "CONV_2D", "AVERAGE_POOL_2D"))
def test_int8_inputs_and_outputs(opencl_device, name, precision):
    data, scale = int8_io(name)
    x = rng_for("io", name).integers(-128, 128, SHAPE).astype(np.int8)
    _compare(data, [x], precision, scale)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("dtype", (np.int8, np.uint8), ids=("int8", "uint8"))
def test_quantize_dequantize_round_trip(opencl_device, dtype, precision):
    """QUANTIZE clamps to the grid's range and rounds; DEQUANTIZE gives the float view."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", SHAPE, np.float32)
    xq = g.tensor("xq", SHAPE, dtype, quant=Q_MID[dtype])
    g.op("QUANTIZE", [x], [xq], version=2 if dtype == np.int8 else 1)
    out = g.tensor("out", SHAPE, np.float32)
    g.op("DEQUANTIZE", [xq], [out], version=2 if dtype == np.int8 else 1)
    g.output(out)
    xs = [rng_for("qdq", dtype).uniform(-9.0, 9.0, SHAPE).astype(np.float32)]  # past the range
    _compare(b.build(), xs, precision, Q_MID[dtype].scale / 2)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_quantized_ops_stay_on_cpu_without_enable_quant(opencl_device, precision):
    from delegate_runtime.gpu.delegate import GpuSession

    data, _ = float_wrapped("ADD", np.int8)
    model = read_model(data)
    log = io.StringIO()
    session = GpuSession(model, precision=precision, log=log, enable_quant=False)
    assert session.delegation.delegated_nodes == 0
    assert "No operations will run on the GPU, and all 3 operations will run on the CPU." in (
        log.getvalue()
    )
    x = [rng_for("noquant").uniform(-2, 2, SHAPE).astype(np.float32)]
    np.testing.assert_array_equal(session.invoke(x)[0], Interpreter(model).invoke(x)[0])
