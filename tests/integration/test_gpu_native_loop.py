"""The hot path's launch loop in C (launch_loop.c, built by native_library.py) against the Python loop,
on a real OpenCL device (PoCL here): the same launches in the same order, the same errors."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest

from delegate_runtime import read_model
from tests.conftest import require, require_module

cl = require_module("pyopencl", "pyopencl (the OpenCL runtime, PoCL here)")

pytestmark = pytest.mark.integration

#: Each launch folds its id into every element: x = 3x + id. Launches run in another order,
#: or one runs twice or never, and the result differs.
STEP = """
__kernel void fold_id(__global int* x, int id) {
  size_t i = get_global_id(0) + get_global_size(0) * (get_global_id(1) + get_global_size(1) * get_global_id(2));
  x[i] = 3 * x[i] + id;
}
"""
N = 64
#: (global size, local size): one, two and three dimensions, with and without a local size.
SHAPES = [((64,), (16,)), ((8, 8), None), ((4, 4, 4), (2, 2, 1)), ((64,), None), ((16, 4), (4, 4))]


@pytest.fixture(scope="module")
def context():
    from delegate_runtime.gpu.opencl.runtime import list_devices

    found = list_devices()
    require(bool(found), "an OpenCL device (a GPU driver or PoCL)")
    return cl.Context([found[0][2]])


@pytest.fixture(scope="module")
def lib():
    from delegate_runtime.gpu.opencl.capi import opencl_library

    found = opencl_library()
    require(found is not None, "the OpenCL ICD loader for direct calls")
    return found


@pytest.fixture()
def decide_again(monkeypatch):
    """native_library with its once-per-process decision undone before and after the test,
    and no DEVICEFARM_NATIVE_LOOP from the environment."""
    from delegate_runtime.gpu.opencl import native_library

    monkeypatch.delenv("DEVICEFARM_NATIVE_LOOP", raising=False)
    native_library.forget()
    yield native_library
    native_library.forget()


@pytest.fixture()
def native(tmp_path, decide_again):
    built = decide_again.native_library(tmp_path)
    require(built is not None, f"the C launch loop ({decide_again.unavailable()})")
    return built


def launches(context, shapes):
    """A queue, the buffer, and one `fold_id` launch per shape, launch i passing id i + 1."""
    program = cl.Program(context, STEP).build()
    buf = cl.Buffer(context, cl.mem_flags.READ_WRITE, 4 * N)
    out = []
    for i, (gsize, lsize) in enumerate(shapes):
        kernel = cl.Kernel(program, "fold_id")
        kernel.set_args(buf, np.int32(i + 1))
        out.append((kernel, gsize, lsize))
    return cl.CommandQueue(context), buf, out


def expected(count: int, start: np.ndarray) -> np.ndarray:
    x = start.astype(np.int64)
    for i in range(count):
        x = 3 * x + (i + 1)
    return x.astype(np.int32)  # wraps as the device's int does


def run(hot, buf, flush_every: int) -> np.ndarray:
    start = np.arange(N, dtype=np.int32)
    out = np.empty_like(start)
    hot.write(buf, start)
    hot.enqueue(flush_every)
    hot.read(buf, out)
    hot.finish()
    return out


@pytest.mark.parametrize("flush_every", [1, 2, 6, 100])
def test_c_loop_runs_every_launch_in_order(context, lib, native, flush_every):
    from delegate_runtime.gpu.opencl.hot_path import HotPath

    q, buf, items = launches(context, SHAPES)
    hot = HotPath(lib, q, items, native)
    assert hot.loop == "c"
    assert (run(hot, buf, flush_every) == expected(len(SHAPES), np.arange(N))).all()


def test_c_loop_and_python_loop_agree(context, lib, native):
    from delegate_runtime.gpu.opencl.hot_path import HotPath

    q, buf, items = launches(context, SHAPES * 3)
    in_c = run(HotPath(lib, q, items, native), buf, 6)
    in_python = HotPath(lib, q, items)
    assert in_python.loop == "python"
    assert (run(in_python, buf, 6) == in_c).all()


@pytest.mark.parametrize("loop", ["c", "python"])
def test_both_loops_name_the_failing_launch(context, lib, native, loop):
    from delegate_runtime.errors import DeviceError
    from delegate_runtime.gpu.opencl.capi import CLCallError
    from delegate_runtime.gpu.opencl.hot_path import HotPath
    from delegate_runtime.gpu.opencl.runtime import device_error

    bad = [*SHAPES[:2], ((10,), (3,)), SHAPES[0]]  # 10 items in groups of 3: refused
    q, _, items = launches(context, bad)
    hot = HotPath(lib, q, items, native if loop == "c" else None)
    assert hot.loop == loop
    with pytest.raises(CLCallError, match=r"clEnqueueNDRangeKernel \(launch 2\)") as caught:
        hot.enqueue(1)
    hot.finish()
    named = device_error(caught.value, "running the GPU partition")
    assert isinstance(named, DeviceError)
    assert "CL_INVALID_WORK_GROUP_SIZE" in str(named) or "CL_INVALID_WORK_ITEM_SIZE" in str(named)


def test_a_session_runs_a_model_through_the_c_loop(tmp_path, monkeypatch, decide_again):
    """A whole model through GpuSession: the C loop is the one its executor uses, and the
    outputs match the CPU reference."""
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.interpreter import Interpreter
    from tests.integration.test_gpu_errors import mixed_model

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    model = read_model(mixed_model())
    session = GpuSession(model, precision="fp32", log=io.StringIO())
    require(session.launch_loop != "python", f"the C launch loop ({session.launch_loop_why})")
    assert session.launch_loop == "c"
    assert session.init_phases_ms["launch_loop"] >= 0
    x = np.random.default_rng(3).standard_normal((1, 6, 6, 4)).astype(np.float32)
    want = Interpreter(model).invoke([x])[0]
    for _ in range(2):  # the second invoke reuses the prepared arguments
        np.testing.assert_allclose(session.invoke([x])[0], want, rtol=1e-5, atol=1e-5)


def test_switched_off_by_the_environment(tmp_path, monkeypatch, decide_again):
    monkeypatch.setenv("DEVICEFARM_NATIVE_LOOP", "0")
    assert decide_again.native_library(tmp_path) is None
    assert decide_again.unavailable() == "DEVICEFARM_NATIVE_LOOP=0"


def test_no_compiler_leaves_the_python_loop(tmp_path, monkeypatch, decide_again):
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert decide_again.native_library(tmp_path) is None
    assert "no C compiler" in decide_again.unavailable()


def test_a_failing_compiler_is_reported(tmp_path, monkeypatch, decide_again):
    fake = tmp_path / "badcc"
    fake.write_text("#!/bin/sh\necho 'badcc: cannot compile' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    assert decide_again.native_library(tmp_path) is None
    why = decide_again.unavailable()
    assert "building launch_loop.c, host_copy.c failed" in why and "badcc: cannot compile" in why
    assert not list((tmp_path / "native").glob("*.so")), "no half-written build is kept"


def test_a_broken_cached_build_is_rebuilt(tmp_path, decide_again):
    cc = decide_again.compiler()
    require(cc is not None, "a C compiler (cc, gcc or clang)")
    target = decide_again.library_path(tmp_path, cc)
    target.parent.mkdir(parents=True)
    target.write_bytes(b"\x7fELF truncated")
    assert decide_again.native_library(tmp_path) is not None, decide_again.unavailable()
    assert target.read_bytes()[:4] == b"\x7fELF" and target.stat().st_size > 1000
    assert oct(target.parent.stat().st_mode & 0o777) == oct(0o700)


def test_the_build_is_reused(tmp_path, decide_again):
    cc = decide_again.compiler()
    require(cc is not None, "a C compiler (cc, gcc or clang)")
    assert decide_again.native_library(tmp_path) is not None, decide_again.unavailable()
    target = decide_again.library_path(tmp_path, cc)
    first = target.stat().st_mtime_ns
    decide_again.forget()
    assert decide_again.native_library(tmp_path) is not None
    assert target.stat().st_mtime_ns == first
    names = sorted(p.name for p in target.parent.iterdir())
    assert names == [target.name, target.name + ".sha256"]
    assert decide_again.build_identity().endswith(decide_again.file_digest(target)[:16])


def test_a_library_that_is_not_what_was_built_is_built_again(tmp_path, decide_again):
    """The cached library is loaded only when it is the file its build wrote: one changed
    after the build (another file under its name) is built again first."""
    cc = decide_again.compiler()
    require(cc is not None, "a C compiler (cc, gcc or clang)")
    assert decide_again.native_library(tmp_path) is not None, decide_again.unavailable()
    target = decide_again.library_path(tmp_path, cc)
    built = target.read_bytes()
    other = target.with_name("other.so")  # another file put under its name (never
    other.write_bytes(built[:-1] + bytes([built[-1] ^ 1]))  # in place: it is mapped here)
    os.replace(other, target)
    decide_again.forget()
    assert decide_again.native_library(tmp_path) is not None, decide_again.unavailable()
    assert target.read_bytes() == built  # the same source and compiler build the same bytes
    assert decide_again.verified(target)


def test_the_compiler_is_checked_and_named_in_the_key(tmp_path, monkeypatch, decide_again):
    """A `cc` that does not answer `--version` is no compiler; the key covers what the
    compiler says it is, so another version under the same name builds its own library."""
    mute = tmp_path / "mutecc"
    mute.write_text("#!/bin/sh\nexit 3\n")
    mute.chmod(0o755)
    monkeypatch.setenv("CC", str(mute))
    assert decide_again.native_library(tmp_path) is None
    assert "--version exited 3" in decide_again.unavailable()
    cc = tmp_path / "versioned-cc"
    paths = []
    for version in ("1.0", "2.0"):
        cc.write_text(f"#!/bin/sh\necho 'versioned-cc {version}'\n")
        cc.chmod(0o755)
        decide_again.compiler_identity.cache_clear()
        paths.append(decide_again.library_path(tmp_path, str(cc)))
    decide_again.compiler_identity.cache_clear()
    assert paths[0] != paths[1]
