"""A whole-map AVERAGE_POOL_2D on the GPU delegate (lowered to the MEAN reduction) against
LiteRT's reference kernels.

A pool whose one output pixel's window covers the whole input (squeeze-excite's global
pooling) runs as mean_axis / mean_axis_wide with the pool's fused activation and absorbed
elementwise nodes; a single window that misses pixels stays on pool2d. One case per shape,
padding, activation and precision; each asserts the kernel that ran.
"""

from __future__ import annotations

import io

import numpy as np
import pytest

from delegate_runtime import litert, read_model
from delegate_runtime.builder import ModelBuilder, Quant
from delegate_runtime.gpu.opencl.staging_edges import CONVERSIONS
from tests.conftest import require, require_module
from tests.ops.test_gpu_ops import PRECISIONS, TOL, opencl_device

require_module("pyopencl", "pyopencl (the GPU delegate's OpenCL binding)")

__all__ = ["opencl_device"]  # the fixture, re-exported for this module's tests

F = np.float32
#: int8 tensors of the quantized case (LiteRT's int8 pool wants the same on both sides).
Q = Quant(0.02, -3)
#: Allowed error of the quantized case in output steps (float sum vs integer rounding).
Q_STEPS = 1.01

#: name -> (input NHWC, filter, stride, padding, activation, kernel that must run)
CASES = {
    "valid-selfie-128x128x16": ((1, 128, 128, 16), (128, 128), (1, 1), "VALID", "NONE", "wide"),
    "valid-batch2-40x40x8": ((2, 40, 40, 8), (40, 40), (1, 1), "VALID", "NONE", "wide"),
    "valid-batch3-6x5x4": ((3, 6, 5, 4), (6, 5), (1, 1), "VALID", "NONE", "axis"),
    "valid-strided-9x8x40": ((1, 9, 8, 40), (9, 8), (2, 3), "VALID", "NONE", "wide"),
    "valid-small-5x6x4": ((1, 5, 6, 4), (5, 6), (1, 1), "VALID", "NONE", "axis"),
    "same-filter-is-map": ((1, 16, 12, 24), (16, 12), (16, 12), "SAME", "NONE", "wide"),
    "same-filter-over-map": ((1, 7, 9, 8), (11, 13), (7, 9), "SAME", "NONE", "axis"),
    "relu6": ((1, 20, 20, 36), (20, 20), (1, 1), "VALID", "RELU6", "wide"),
    "relu": ((1, 3, 3, 5), (3, 3), (1, 1), "VALID", "RELU", "axis"),
    # one window, but it misses pixels: the pool's own kernel
    "valid-window-short": ((1, 5, 5, 4), (3, 3), (3, 3), "VALID", "NONE", "pool2d"),
    "same-window-short": ((1, 6, 6, 4), (4, 4), (6, 6), "SAME", "NONE", "pool2d"),
}
KERNEL = {"wide": "mean_axis_wide", "axis": "mean_axis", "pool2d": "pool2d"}


def _pool(g, x, y, k, stride, padding, act, version=1) -> None:
    g.op(
        "AVERAGE_POOL_2D",
        [x],
        [y],
        version=version,
        padding=padding,
        filter_height=k[0],
        filter_width=k[1],
        stride_h=stride[0],
        stride_w=stride[1],
        fused_activation_function=act,
    )


def _inputs(shape: tuple[int, ...]) -> list[np.ndarray]:
    rng = np.random.default_rng(sum(shape))
    return [rng.uniform(-2, 2, shape).astype(F) + 0.3]


def _session(model: bytes, precision: str):
    from delegate_runtime.gpu.delegate import GpuSession

    session = GpuSession(read_model(model), precision=precision, log=io.StringIO())
    d = session.delegation
    assert d.delegated_nodes == d.total_nodes, f"not fully delegated: {d.to_dict()}"
    return session


def _kernels(session) -> list[str]:
    names = [n for ex in session.executors for n in ex.kernel_names]
    return [n for n in names if n not in (*CONVERSIONS, "qdq")]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("name", list(CASES))
def test_whole_map_average_pool_matches_litert(opencl_device, name, precision):
    shape, k, stride, padding, act, kernel = CASES[name]
    require(litert.available(), "ai-edge-litert (the LiteRT oracle)")
    b = ModelBuilder()
    g = b.main
    x = g.input("x", shape, F)
    y = g.tensor("y", (shape[0], 1, 1, shape[3]), F)
    _pool(g, x, y, k, stride, padding, act)
    g.output(y)
    ins = _inputs(shape)
    want = litert.run(b.build(), ins, reference=True)[0]
    session = _session(b.build(), precision)
    assert _kernels(session) == [KERNEL[kernel]]
    for _ in range(2):  # mean_axis_wide resets its counters for the next run
        got = session.invoke(ins)[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=TOL[precision], atol=TOL[precision])


@pytest.mark.parametrize("precision", PRECISIONS)
def test_whole_map_pool_absorbs_the_elementwise_after_it(opencl_device, precision):
    """Pool -> ADD of a per-channel constant -> LOGISTIC: one mean kernel runs all three,
    the ADD's operand read by channel."""
    require(litert.available(), "ai-edge-litert (the LiteRT oracle)")
    shape = (1, 32, 32, 24)
    b = ModelBuilder()
    g = b.main
    x = g.input("x", shape, F)
    p = g.tensor("p", (1, 1, 1, 24), F)
    _pool(g, x, p, (32, 32), (1, 1), "VALID", "RELU")
    bias = np.linspace(-1.5, 1.5, 24, dtype=F).reshape(1, 1, 1, 24)
    s = g.tensor("s", (1, 1, 1, 24), F)
    g.op("ADD", [p, g.const("bias", bias)], [s], fused_activation_function="NONE")
    y = g.tensor("y", (1, 1, 1, 24), F)
    g.op("LOGISTIC", [s], [y])
    g.output(y)
    ins = _inputs(shape)
    want = litert.run(b.build(), ins, reference=True)[0]
    session = _session(b.build(), precision)
    assert _kernels(session) == ["mean_axis_wide"]
    assert session.fused_kernels() == {0: (0, 1, 2)}
    np.testing.assert_allclose(session.invoke(ins)[0], want, rtol=TOL[precision], atol=1e-3)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("hw", [(6, 7), (24, 24)], ids=["axis", "wide"])
def test_whole_map_int8_pool_matches_litert(opencl_device, hw, precision):
    """float -> QUANTIZE -> int8 whole-map pool (RELU6) -> DEQUANTIZE: within a step of
    LiteRT's integer arithmetic."""
    require(litert.available(), "ai-edge-litert (the LiteRT oracle)")
    shape = (1, *hw, 12)
    b = ModelBuilder()
    g = b.main
    x = g.input("x", shape, F)
    xq = g.tensor("xq", shape, np.int8, quant=Q)
    g.op("QUANTIZE", [x], [xq], version=2)
    yq = g.tensor("yq", (1, 1, 1, 12), np.int8, quant=Q)
    _pool(g, xq, yq, hw, (1, 1), "VALID", "RELU6", version=2)
    y = g.tensor("y", (1, 1, 1, 12), F)
    g.op("DEQUANTIZE", [yq], [y], version=2)
    g.output(y)
    ins = _inputs(shape)
    want = litert.run(b.build(), ins, reference=True)[0]
    session = _session(b.build(), precision)
    assert KERNEL["wide" if hw[0] * hw[1] >= 64 else "axis"] in _kernels(session)
    assert "pool2d" not in _kernels(session)
    np.testing.assert_allclose(session.invoke(ins)[0], want, rtol=0, atol=Q_STEPS * Q.scale)
