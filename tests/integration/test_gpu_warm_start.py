"""A GPU session's warm start on a real OpenCL device (PoCL here): the context made beside
the lowering, a cached program loaded beside the uploads, the lowering read from the
kernel cache, a wrong guess about host-memory edges lowered again, kernels made through
the C API (RawKernel); each path's outputs against LiteRT's reference kernels."""

from __future__ import annotations

import io

import numpy as np
import pytest

from delegate_runtime import litert, read_model
from delegate_runtime.builder import ModelBuilder
from tests.conftest import require, require_module
from tests.integration.test_gpu_errors import SHAPE
from tests.integration.test_gpu_errors import mixed_model as errors_model

cl = require_module("pyopencl", "pyopencl (the OpenCL runtime, PoCL here)")

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def device():
    from delegate_runtime.gpu.opencl.runtime import list_devices

    found = list_devices()
    require(bool(found), "an OpenCL device (a GPU driver or PoCL)")
    return found[0][2]


def mixed_model() -> bytes:
    """test_gpu_errors' model of two GPU partitions, its CONV_2D given a bias as LiteRT
    requires: CONV_2D -> RELU -> LOG_SOFTMAX (not a GPU op) -> ADD -> LOGISTIC."""
    return errors_model(bias=True)


def _check(session) -> None:
    """The session's outputs against LiteRT's reference kernels on the same model."""
    require(litert.available(), "ai-edge-litert (the LiteRT oracle)")
    x = np.random.default_rng(5).standard_normal(SHAPE).astype(np.float32)
    want = litert.run(mixed_model(), [x], reference=True)[0]
    np.testing.assert_allclose(session.invoke([x])[0], want, rtol=1e-5, atol=1e-5)


def test_a_cached_program_loads_beside_the_uploads(device, tmp_path):
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.tools.process_init import init_split_line

    model = read_model(mixed_model())
    cold = GpuSession(model, device="0:0", serialization_dir=str(tmp_path), log=io.StringIO())
    warm = GpuSession(model, device="0:0", serialization_dir=str(tmp_path), log=io.StringIO())
    assert not cold.program_beside_upload  # built: in its own phase, before the uploads
    assert warm.program_beside_upload and warm.program_from_cache
    assert warm.init_phases_ms["program"] > 0  # the loading thread's own time
    assert "from cache, beside the upload" in init_split_line(0, 0, 0, warm)
    # its arenas laid out before the context was waited for; the cold one's after it
    assert "layout" in warm.init_phases_ms and "layout" not in cold.init_phases_ms
    assert "arena layout" in init_split_line(0, 0, 0, warm)
    _check(cold)
    _check(warm)


@pytest.mark.lowering_cache
def test_a_warm_start_reads_the_lowering_the_cold_one_kept(device, tmp_path):
    """The cold session keeps its lowering in the kernel cache's folder for it; the next
    session of the same model, precision, switches and device reads it instead of lowering
    (its init split says so); other switches make their own; each computes as LiteRT's
    reference kernels do."""
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.switches import Switches
    from delegate_runtime.tools.process_init import init_split_line

    model = read_model(mixed_model())

    def session(**kw):
        return GpuSession(
            model, device="0:0", serialization_dir=str(tmp_path), log=io.StringIO(), **kw
        )

    cold, warm = session(), session()
    assert not cold.lowering_from_cache and warm.lowering_from_cache
    assert len(list((tmp_path / "lowering").glob("*.bin"))) == 1
    lowered = f"lower {warm.init_phases_ms['lower']:.1f} (from cache)"
    assert lowered in init_split_line(0, 0, 0, warm)
    unfused = session(switches=Switches.from_env().replace(fuse=False))
    assert not unfused.lowering_from_cache  # a lowering of its own, kept beside
    assert len(list((tmp_path / "lowering").glob("*.bin"))) == 2
    for s in (cold, warm, unfused):
        _check(s)


@pytest.mark.lowering_cache
def test_a_damaged_lowering_is_made_again(device, tmp_path):
    from delegate_runtime.gpu.delegate import GpuSession

    model = read_model(mixed_model())

    def session():
        return GpuSession(model, device="0:0", serialization_dir=str(tmp_path), log=io.StringIO())

    session()
    (entry,) = (tmp_path / "lowering").glob("*.bin")
    raw = bytearray(entry.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    entry.write_bytes(bytes(raw))
    again = session()
    assert not again.lowering_from_cache  # refused, removed, made and kept again
    assert session().lowering_from_cache
    _check(again)


@pytest.mark.lowering_cache
def test_kept_units_load_beside_the_lowering(device, tmp_path, monkeypatch):
    """Where the cache holds the binaries the driver loads (NVIDIA's; PoCL's real binaries
    here, its own kernel cache set aside for the test), a session keeps its units' keys and
    the next one loads them while it lowers; a session whose lowering needs other units
    drops the early load and loads its own; each computes as LiteRT's kernels do."""
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.opencl import program

    monkeypatch.setattr(program, "DRIVER_CACHED", ())  # PoCL's binaries in our cache
    model = read_model(mixed_model())

    def session(**kw):
        return GpuSession(
            model, device="0:0", serialization_dir=str(tmp_path), log=io.StringIO(), **kw
        )

    cold, warm = session(), session()
    assert not cold.program_loaded_early
    assert warm.program_loaded_early and warm.program_from_cache
    assert len(list((tmp_path / "lowering").glob("units_*.bin"))) == 1
    for entry in (tmp_path / "lowering").glob("lowering_*.bin"):
        entry.unlink()  # the lowering made again: the same units, loaded early all the same
    again = session()
    assert again.program_loaded_early and not again.lowering_from_cache
    for s in (cold, warm, again):
        _check(s)


@pytest.mark.lowering_cache
def test_an_early_load_of_other_units_is_dropped(device, tmp_path, monkeypatch):
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.opencl import early_program, program

    monkeypatch.setattr(program, "DRIVER_CACHED", ())
    model = read_model(mixed_model())

    def session():
        return GpuSession(model, device="0:0", serialization_dir=str(tmp_path), log=io.StringIO())

    session()
    assert len(list((tmp_path / "lowering").glob("units_*.bin"))) == 1
    real_load = early_program.lowering_cache.load

    def stale(cache, key):  # the kept keys name a unit of another program
        got = real_load(cache, key)
        if isinstance(got, early_program.KeptUnits):
            return early_program.KeptUnits(got.keys, got.options + " -DOTHER")
        return got

    monkeypatch.setattr(early_program.lowering_cache, "load", stale)
    dropped = session()
    assert not dropped.program_loaded_early and dropped.program_from_cache
    _check(dropped)


def test_the_context_is_made_beside_the_lowering(device):
    from delegate_runtime.gpu.delegate import GpuSession

    model = read_model(mixed_model())
    session = GpuSession(model, device="0:0", log=io.StringIO())
    phases = session.init_phases_ms
    assert {"device", "lower", "context", "context_made"} <= phases.keys()
    assert list(phases).index("lower") < list(phases).index("context")  # lowered first
    assert "lower_again" not in phases  # PoCL names no host-edge extension: guessed right
    _check(session)


def test_host_edges_the_device_refuses_are_lowered_again(device, monkeypatch):
    """The device names the extension but the context's check refuses the edges: the
    lowering guessed staged edges, and lowers again without them."""
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.opencl import host_edges, preparation

    monkeypatch.setattr(host_edges, "offered", lambda d: True)
    monkeypatch.setattr(preparation, "host_edges_for", lambda ctx, queue: None)
    model = read_model(mixed_model())
    session = GpuSession(model, device="0:0", log=io.StringIO())
    assert session.plan.host_edges  # the hot path's plan asks for them on any device
    assert "lower_again" in session.init_phases_ms and not session.host_edges
    _check(session)


def test_raw_kernel_sets_every_kind_of_argument(device):
    from delegate_runtime.gpu.opencl.capi import CLCallError, opencl_library
    from delegate_runtime.gpu.opencl.raw_kernel import RawKernel

    lib = opencl_library()
    require(lib is not None, "the OpenCL C library pyopencl links")
    ctx = cl.Context([device])
    source = """
    __kernel void k(__global float* out, int n, float4 v, __local float* scratch, int16 w) {
      scratch[0] = v.y;
      out[0] = n; out[1] = scratch[0]; out[2] = v.w; out[3] = w.sf;
    }"""
    program = cl.Program(ctx, source).build()
    kernel = RawKernel(lib, program, "k")
    out = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 16)
    vector = np.array([1.5, 2.5, 3.5, 4.5], np.float32)
    kernel.set_args(out, np.int32(7), vector, cl.LocalMemory(16), np.arange(16, dtype=np.int32))
    queue = cl.CommandQueue(ctx)
    cl.enqueue_nd_range_kernel(queue, kernel.pyopencl, (1,), (1,))
    got = np.empty(4, np.float32)
    cl.enqueue_copy(queue, got, out)
    np.testing.assert_array_equal(got, [7, 2.5, 4.5, 15])
    assert kernel.function_name == "k" and kernel.int_ptr == kernel.pyopencl.int_ptr
    with pytest.raises(TypeError, match="argument 1: int"):
        kernel.set_arg(1, 7)  # a Python int has no OpenCL size: numpy's scalars have
    with pytest.raises(CLCallError) as raised:
        kernel.set_arg(9, np.int32(0))
    assert raised.value.code == -49  # CL_INVALID_ARG_INDEX
    with pytest.raises(CLCallError, match="clCreateKernel"):
        RawKernel(lib, program, "no_such_kernel")


def test_the_device_is_found_as_the_session_starts_and_a_bad_one_reported_where_needed():
    """The device is looked for in a thread from the session's start (beside the folding):
    a device that is not there fails only a session with a GPU partition, with the error it
    gave before, and a session whose model has none runs on the CPU as ever."""
    from delegate_runtime.errors import JobError
    from delegate_runtime.gpu.delegate import GpuSession

    with pytest.raises(JobError, match="no OpenCL device 9:9"):
        GpuSession(read_model(mixed_model()), device="9:9", log=io.StringIO())
    b = ModelBuilder()
    x = b.main.input("x", SHAPE)
    y = b.main.tensor("y", SHAPE)
    b.main.op("LOG_SOFTMAX", [x], [y])  # no GPU op: nothing delegated
    b.main.output(y)
    cpu_only = GpuSession(read_model(b.build()), device="9:9", log=io.StringIO())
    assert cpu_only.delegation.delegated_nodes == 0 and not cpu_only.executors
    require(litert.available(), "ai-edge-litert (the LiteRT oracle)")
    x = np.random.default_rng(1).standard_normal(SHAPE).astype(np.float32)
    want = litert.run(b.build(), [x], reference=True)[0]
    np.testing.assert_allclose(cpu_only.invoke([x])[0], want, rtol=1e-6, atol=1e-6)


def test_an_unusable_kernel_cache_folder_fails_only_a_session_with_a_gpu_partition(tmp_path):
    from delegate_runtime.gpu.delegate import GpuSession

    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    with pytest.raises(OSError):
        GpuSession(read_model(mixed_model()), serialization_dir=str(blocked), log=io.StringIO())
    b = ModelBuilder()
    x = b.main.input("x", SHAPE)
    y = b.main.tensor("y", SHAPE)
    b.main.op("LOG_SOFTMAX", [x], [y])  # nothing delegated: the CPU runs it, as ever
    b.main.output(y)
    cpu_only = GpuSession(read_model(b.build()), serialization_dir=str(blocked), log=io.StringIO())
    assert cpu_only.delegation.delegated_nodes == 0
