"""Building kernels leaves the interpreter to other threads: a lab agent builds on its job
thread while its heartbeat thread must keep beating (PoCL took 90 s cold to compile the
delegate's program on a 2-core machine, and the agent's devices went offline)."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from tests.conftest import require, require_module

cl = require_module("pyopencl", "pyopencl (the OpenCL runtime, PoCL here)")

pytestmark = pytest.mark.integration


def slow_source(lines: int) -> str:
    """A kernel slow to compile, unique per call so that no compiler cache holds it."""
    body = "".join(f"x = x * {i}.5f + sin(x * {i}.25f);\n" for i in range(lines))
    tag = uuid.uuid4().hex
    return f"__kernel void k_{tag}(__global float* a) {{ float x = a[0];\n{body} a[0] = x; }}"


@pytest.fixture(scope="module")
def device():
    from delegate_runtime.gpu.opencl.runtime import list_devices

    found = list_devices()
    require(bool(found), "an OpenCL device (a GPU driver or PoCL)")
    return found[0][2]


def longest_pause_while(work) -> tuple[float, float]:
    """(seconds `work` took, longest pause of a thread ticking every 10 ms meanwhile)."""
    ticks: list[float] = []
    done = threading.Event()

    def tick() -> None:
        while not done.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.01)

    ticker = threading.Thread(target=tick)
    ticker.start()
    time.sleep(0.05)
    start = time.monotonic()
    work()
    took = time.monotonic() - start
    done.set()
    ticker.join()
    return took, max(b - a for a, b in zip(ticks, ticks[1:], strict=False))


def test_building_and_reading_the_binary_let_other_threads_run(device):
    from delegate_runtime.gpu.opencl.capi import opencl_library, program_binary
    from delegate_runtime.gpu.opencl.program import build_source

    lib = opencl_library()
    require(lib is not None, "the OpenCL C library (libOpenCL)")
    ctx = cl.Context([device])
    binary: list[bytes] = []

    def build() -> None:
        program = build_source(ctx, device, slow_source(600), "")
        binary.append(program_binary(lib, program))

    took, pause = longest_pause_while(build)
    assert binary[0]
    # pyopencl holds the interpreter while it reads the binary (PoCL compiles then): the
    # ticker paused 0.46 s of a 1.34 s build here; through the C API, 20 ms
    assert pause < 0.2 * took, (took, pause)


def test_a_failed_build_raises_with_the_compiler_log(device):
    from delegate_runtime.gpu.opencl.program import build_source

    ctx = cl.Context([device])
    with pytest.raises(cl.RuntimeError, match="undeclared_name"):
        build_source(
            ctx, device, "__kernel void k(__global float* a) { a[0] = undeclared_name; }", ""
        )
