"""MEAN on the GPU delegate over several batches and slices: values against LiteRT's
reference kernels, and no store past the output buffer.

`mean_axis_wide` splits a large reduction over work groups (slices) that meet through a
scratch buffer and an atomic counter. Under PoCL 3.1 an early `return` for the one-slice
case, before the kernel's barriers, made work items past the last channel store past
`out` (24 floats past a [2, 8] output; PoCL's heap then aborted). The guard test binds
the built kernel's output to a buffer with a guard band behind it and checks the band.
"""

from __future__ import annotations

import io

import numpy as np
import pytest

from delegate_runtime import litert, read_model
from delegate_runtime.builder import ModelBuilder
from delegate_runtime.gpu.opencl.specialize import generic_name
from tests.conftest import require, require_module
from tests.ops.test_gpu_ops import PRECISIONS, TOL, opencl_device

require_module("pyopencl", "pyopencl (the GPU delegate's OpenCL binding)")

__all__ = ["opencl_device"]  # the fixture, re-exported for this module's tests

F = np.float32
#: floats of guard band behind the output
GUARD = 256
#: id -> (input NHWC, kernel that must run); MEAN over H and W
CASES = {
    "batch2-sliced": ((2, 40, 40, 8), "mean_axis_wide"),
    "batch3-sliced-wide-channels": ((3, 24, 24, 40), "mean_axis_wide"),
    "batch1-sliced": ((1, 40, 40, 8), "mean_axis_wide"),
    "batch2-one-slice": ((2, 12, 12, 8), "mean_axis_wide"),
    "batch4-small": ((4, 5, 6, 3), "mean_axis"),
}


def _model(shape: tuple[int, ...], keep_dims: bool) -> bytes:
    b = ModelBuilder()
    g = b.main
    x = g.input("x", shape, F)
    out = (shape[0], 1, 1, shape[3]) if keep_dims else (shape[0], shape[3])
    y = g.tensor("y", out, F)
    g.op("MEAN", [x, g.const("axes", np.array([1, 2], np.int32))], [y], keep_dims=keep_dims)
    g.output(y)
    return b.build()


def _inputs(shape: tuple[int, ...]) -> list[np.ndarray]:
    rng = np.random.default_rng(sum(shape))
    return [rng.uniform(-2, 2, shape).astype(F) + 0.25]


def _session(model: bytes, precision: str, specialize: bool | None = None):
    from delegate_runtime.gpu.delegate import GpuSession

    return GpuSession(
        read_model(model), precision=precision, log=io.StringIO(), specialize=specialize
    )


def _mean_kernel(session):
    [(kernel, gsize, lsize)] = [
        k for ex in session.executors for k in ex.kernels
        if k[0].function_name.startswith("mean_axis")
    ]  # fmt: skip
    return kernel, gsize, lsize


@pytest.mark.parametrize("keep_dims", [True, False], ids=["keep", "drop"])
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("name", list(CASES))
def test_mean_matches_litert(opencl_device, name, precision, keep_dims):
    shape, kernel = CASES[name]
    require(litert.available(), "ai-edge-litert (the LiteRT oracle)")
    model, ins = _model(shape, keep_dims), _inputs(shape)
    want = litert.run(model, ins, reference=True)[0]
    session = _session(model, precision)
    assert generic_name(_mean_kernel(session)[0].function_name) == kernel  # or its copy
    for _ in range(3):  # the slices' counters are reset for the next run
        got = session.invoke(ins)[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=TOL[precision], atol=TOL[precision])


@pytest.mark.parametrize("name", [n for n, (_, k) in CASES.items() if k == "mean_axis_wide"])
def test_mean_axis_wide_stores_nothing_past_its_output(opencl_device, name):
    import pyopencl as cl

    shape, _ = CASES[name]
    # the shared program's kernel, which takes its buffers (a GPU's own copy takes the arena)
    session = _session(_model(shape, keep_dims=False), "fp32", specialize=False)
    kernel, gsize, lsize = _mean_kernel(session)
    kernel = getattr(kernel, "pyopencl", kernel)  # a RawKernel's pyopencl wrapper
    ctx = kernel.context
    queue = cl.CommandQueue(ctx)
    mf = cl.mem_flags
    x = _inputs(shape)[0]
    n = shape[0] * shape[3]
    sentinel = np.full(n + GUARD, -7.0, F)
    src = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
    out = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=sentinel)
    kernel.set_arg(0, src)
    kernel.set_arg(1, out)  # the scratch and the counters stay the session's own
    for _ in range(2):
        cl.enqueue_nd_range_kernel(queue, kernel, gsize, lsize)
        got = np.empty_like(sentinel)
        cl.enqueue_copy(queue, got, out)
        queue.finish()
        past = np.flatnonzero(got[n:] != -7.0)
        assert past.size == 0, f"{past.size} floats stored past the output, from {past[0]}"
        np.testing.assert_allclose(got[:n], x.mean(axis=(1, 2)).ravel(), rtol=1e-5, atol=1e-6)


#: id -> (input NHWC, axes, keep_dims): MEAN then ADD of a vector over the output's last
#: axis, then RELU; the mean kernel runs all three (its epilogue's channel is the index in
#: the output's last axis, whatever the reduced axes)
FUSED = {
    "hw-keep-sliced": ((2, 40, 40, 8), [1, 2], True),
    "h-only": ((1, 5, 6, 8), [1], False),
    "last-axis": ((1, 4, 6, 80), [3], False),
    "wc-wide": ((2, 3, 16, 12), [2, 3], False),
}


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("name", list(FUSED))
def test_mean_absorbs_the_elementwise_after_it(opencl_device, name, precision):
    shape, axes, keep = FUSED[name]
    require(litert.available(), "ai-edge-litert (the LiteRT oracle)")
    out = tuple(1 if i in axes else d for i, d in enumerate(shape) if keep or i not in axes)
    b = ModelBuilder()
    g = b.main
    x = g.input("x", shape, F)
    m = g.tensor("m", out, F)
    g.op("MEAN", [x, g.const("axes", np.array(axes, np.int32))], [m], keep_dims=keep)
    bias = np.linspace(-0.4, 0.3, out[-1], dtype=F)
    s = g.tensor("s", out, F)
    g.op("ADD", [m, g.const("bias", bias)], [s], fused_activation_function="NONE")
    y = g.tensor("y", out, F)
    g.op("RELU", [s], [y])
    g.output(y)
    ins = _inputs(shape)
    want = litert.run(b.build(), ins, reference=True)[0]
    session = _session(b.build(), precision)
    assert session.fused_kernels() == {0: (0, 1, 2)}
    got = session.invoke(ins)[0]
    np.testing.assert_allclose(got, want, rtol=TOL[precision], atol=TOL[precision])
