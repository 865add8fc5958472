"""A kernel given a code outside the table poisons its output (NaN) on the device instead
of running some other op."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import require, require_module

require_module("pyopencl", "pyopencl (the GPU delegate's OpenCL binding)")


def _binary4d(x, out, n, op, act=0, step=0):
    """binary4d over n elements of x with itself, then one epilogue step of code `step`."""
    epilogue = [np.int32(act)]
    for code in (step, 0, 0):
        epilogue += [np.array([code, 0], np.int32), x, np.zeros(4, np.float32)]
    shape, strides = _i4(1, 1, 1, n), _i4(0, 0, 0, 1)
    oview = np.array([n, 0], np.int32)
    return [x, x, out, shape, strides, strides, np.int32(op), oview, *epilogue]


@pytest.mark.parametrize(
    "kernel,args",
    [
        pytest.param("binary4d", lambda x, out, n: _binary4d(x, out, n, 99), id="binary-op"),
        pytest.param("binary4d", lambda x, out, n: _binary4d(x, out, n, 0, act=5), id="activation"),
        pytest.param(
            "binary4d", lambda x, out, n: _binary4d(x, out, n, 0, step=99), id="epilogue-step"
        ),
        pytest.param(
            "unary",
            lambda x, out, n: [x, out, np.int32(n), np.int32(99), np.float32(0)],
            id="unary-op",
        ),
    ],
)
def test_unknown_code_writes_nan(kernel, args):
    import pyopencl as cl

    from delegate_runtime.gpu.opencl.program import build_options, program_source
    from delegate_runtime.gpu.opencl.runtime import describe, list_devices

    devices = list_devices()
    require(bool(devices), "an OpenCL device (a GPU driver or PoCL)")
    device = devices[0][2]
    ctx = cl.Context([device])
    queue = cl.CommandQueue(ctx)
    prg = cl.Program(ctx, program_source()).build(options=build_options("fp32", describe(device)))
    n = 8
    host = np.ones(n, np.float32)  # 1 AND 1 would be 1, a copy 1
    mf = cl.mem_flags
    x = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=host)
    out = cl.Buffer(ctx, mf.READ_WRITE, host.nbytes)
    k = cl.Kernel(prg, kernel)
    k.set_args(*args(x, out, n))
    cl.enqueue_nd_range_kernel(queue, k, (n,), None)
    result = np.empty_like(host)
    cl.enqueue_copy(queue, result, out)
    assert np.isnan(result).all()


def _i4(*v: int) -> np.ndarray:
    return np.array(v, np.int32)
