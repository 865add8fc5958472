"""Biases and weights stay float32 with half storage (opencl/const_types.py): which
constants are uploaded so, a constant read both ways, and a bias and weights that half
storage would round, against LiteRT's reference kernels."""

from __future__ import annotations

import io

import numpy as np
import pytest

from delegate_runtime.gpu.opencl import const_types
from delegate_runtime.gpu.opencl.const_types import FLOAT32_TWIN, float32_consts
from delegate_runtime.gpu.opencl.launch import Buf, Const, Launch, Lowered
from delegate_runtime.gpu.opencl.program import program_source
from tests.conftest import require_module
from tests.ops.test_gpu_fusion import (
    _binary,
    _graph,
    _same_conv,
    _same_depthwise,
    check_against_litert,
)
from tests.ops.test_gpu_ops import PRECISIONS, opencl_device, randn

__all__ = ["opencl_device"]  # the fixture, re-exported for this module's tests

F = np.float32


def _depthwise_launch(bias: str, operand: str) -> Launch:
    """A depthwise_conv2d launch: weights Const("w"), bias Const(bias), its first
    epilogue operand Const(operand), every other argument a buffer or a zero."""
    from delegate_runtime.gpu.opencl.cl_source import kernel_params

    args = []
    for param in kernel_params(program_source(), "depthwise_conv2d"):
        named = {"w": Const("w"), "bias": Const(bias), "p0": Const(operand)}
        if param.name in named:
            args.append(named[param.name])
        elif param.global_pointer:
            args.append(Buf(len(args)))
        else:
            args.append(np.int32(0))
    return Launch("depthwise_conv2d", args, (4,), None, node=0)


def _lowered(*launches: Launch) -> Lowered:
    consts = {k: np.ones(4, F) for k in ("w", "b", "k", "shared")}
    return Lowered(list(launches), consts)


def test_biases_and_weights_are_float32_operands_storage() -> None:
    """The bias a kernel reads through `float*` and the weights it reads through
    `weight_t*` are float32; its epilogue operand, read through `store_t*`, keeps the
    storage type."""
    lowered = _lowered(_depthwise_launch("b", "k"))
    assert float32_consts(program_source(), lowered) == {"b", "w"}


def test_half_weights_keep_the_storage_type() -> None:
    """Weights read in half (a session's `half_weights`) keep the storage type, the bias
    stays float32; weights that are half values are read in half, others not."""
    lowered = _lowered(_depthwise_launch("b", "k"))
    assert float32_consts(program_source(), lowered, half_weights=True) == {"b"}
    assert const_types.weights_in_half(program_source(), [lowered])  # ones: half values
    lowered.consts["w"] = np.full(4, 0.1, F)
    assert not const_types.weights_in_half(program_source(), [lowered])


def test_a_constant_read_both_ways_gets_a_float32_twin() -> None:
    """A constant one launch reads as its bias and another as an epilogue operand: the
    bias reader gets a float32 twin; the other keeps the original in the storage type."""
    lowered = _lowered(_depthwise_launch("shared", "k"), _depthwise_launch("b", "shared"))
    twin = "shared" + FLOAT32_TWIN
    assert float32_consts(program_source(), lowered) == {twin, "b", "w"}
    first, second = (launch.args for launch in lowered.launches)
    assert Const(twin) in first and Const("shared") not in first
    assert Const("shared") in second
    np.testing.assert_array_equal(lowered.consts[twin], lowered.consts["shared"])


def large_bias_then_offset() -> tuple[bytes, list[np.ndarray]]:
    """A 1x1 convolution whose bias is about 1000.3 (half rounds it to 1000.5), then ADD
    -1000 (in its epilogue): the output is small, so half storage keeps it close, but a
    half bias would be 0.2 off."""
    shape = (1, 4, 5, 8)
    b, g, (x,), ins = _graph(shape)
    w = g.const("w", randn("w", 8, 1, 1, 8, scale=0.1))
    bias = g.const("b", (1000.3 + 0.01 * np.arange(8)).astype(F))
    t = g.tensor("t", shape, F)
    _same_conv(g, [x, w, bias], t)
    y = _binary(g, "ADD", t, g.const("k", np.full(8, -1000.0, F)), shape, "y")
    g.output(y)
    return b.build(), ins


@pytest.mark.parametrize("precision", PRECISIONS)
def test_a_large_bias_keeps_its_precision(opencl_device, precision) -> None:
    """LiteRT's reference kernels as oracle, fp16 within 2e-3 absolute of outputs near
    0.3 (a half-stored bias would put every output 0.2 off)."""
    require_module("pyopencl", "pyopencl (the GPU delegate's OpenCL binding)")
    model, inputs = large_bias_then_offset()
    session = check_against_litert(model, inputs, precision, tol_abs=0.0)
    assert session.fused_kernels() == {0: (0, 1)}
    from delegate_runtime import litert

    want = litert.run(model, inputs, reference=True)[0]
    got = session.invoke(inputs)[0]
    np.testing.assert_allclose(got, want, atol=2e-3, rtol=0)


def tiny_weights_then_scale(kind: str) -> tuple[bytes, list[np.ndarray]]:
    """A 1x1 convolution (a GEMM) or a 3x3 depthwise convolution whose weights are about
    1e-6, below half's smallest normal (6.1e-5), where half keeps steps of 6e-8 (several
    percent of each weight), then MUL 1000 in its epilogue so the output is a normal half
    number again: float32 weights keep it within a few 2^-11 of LiteRT's, half weights
    put it over a percent off."""
    shape = (1, 4, 5, 8)
    b, g, (x,), ins = _graph(shape)
    t = g.tensor("t", shape, F)
    bias = g.const("b", np.zeros(8, F))
    if kind == "conv":
        _same_conv(g, [x, g.const("w", randn("tw", 8, 1, 1, 8, scale=1e-6)), bias], t)
    else:
        w = g.const("w", randn("tdw", 1, 3, 3, 8, scale=1e-6))
        _same_depthwise(g, [x, w, bias], t)
    y = _binary(g, "MUL", t, g.const("k", np.full(8, 1000.0, F)), shape, "y")
    g.output(y)
    return b.build(), ins


@pytest.mark.parametrize("kind", ["conv", "depthwise"])
@pytest.mark.parametrize("precision", PRECISIONS)
def test_tiny_weights_keep_their_precision(opencl_device, precision, kind) -> None:
    """LiteRT's reference kernels as oracle: within 2e-3 of the output's largest magnitude
    (the input and output rounded to half cost about 1e-3; weights rounded to half put
    outputs 1.5-1.6e-2 off)."""
    require_module("pyopencl", "pyopencl (the GPU delegate's OpenCL binding)")
    from delegate_runtime import litert, read_model
    from delegate_runtime.gpu.delegate import GpuSession

    require_module("ai_edge_litert", "ai-edge-litert (the LiteRT oracle)")
    model, inputs = tiny_weights_then_scale(kind)
    want = litert.run(model, inputs, reference=True)[0]
    session = GpuSession(read_model(model), precision=precision, log=io.StringIO())
    assert session.fused_kernels() == {0: (0, 1)}
    got = session.invoke(inputs)[0]
    np.testing.assert_allclose(got, want, atol=2e-3 * float(np.abs(want).max()), rtol=0)


def half_valued_weights() -> tuple[bytes, list[np.ndarray]]:
    """A 1x1 convolution and a 3x3 depthwise convolution whose weights are half values
    (as a file with fp16 weights holds after DEQUANTIZE)."""
    shape = (1, 4, 5, 8)
    b, g, (x,), ins = _graph(shape)
    t, y = g.tensor("t", shape, F), g.tensor("y", shape, F)
    w = randn("hw", 8, 1, 1, 8).astype(np.float16).astype(F)
    _same_conv(g, [x, g.const("w", w), g.const("b", randn("hb", 8))], t)
    dw = randn("hdw", 1, 3, 3, 8).astype(np.float16).astype(F)
    _same_depthwise(g, [t, g.const("dw", dw), g.const("db", randn("hdb", 8))], y)
    g.output(y)
    return b.build(), ins


def test_weights_that_are_half_values_are_read_in_half(opencl_device, monkeypatch) -> None:
    """Half weights where half loses nothing: the same outputs, to the bit, as the same
    weights read in float32; weights that are not half values stay float32."""
    require_module("pyopencl", "pyopencl (the GPU delegate's OpenCL binding)")
    from delegate_runtime import read_model
    from delegate_runtime.gpu.delegate import GpuSession

    model, inputs = half_valued_weights()
    half = GpuSession(read_model(model), precision="fp16", log=io.StringIO())
    assert half.half_weights
    # the plain path: the same weights read in float32 (weights_in_half refusing them)
    monkeypatch.setattr(const_types, "weights_in_half", lambda source, parts: False)
    wide = GpuSession(read_model(model), precision="fp16", log=io.StringIO())
    assert not wide.half_weights
    np.testing.assert_array_equal(half.invoke(inputs)[0], wide.invoke(inputs)[0])
    monkeypatch.undo()
    tiny, _ = tiny_weights_then_scale("conv")
    assert not GpuSession(read_model(tiny), precision="fp16", log=io.StringIO()).half_weights
