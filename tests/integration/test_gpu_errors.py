"""The GPU delegate on a real OpenCL device (PoCL without a GPU): named driver errors,
device selection, and mixed GPU + CPU execution with TFLite's messages."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder
from delegate_runtime.errors import DeviceError, JobError
from delegate_runtime.interpreter import Interpreter
from tests.conftest import require, require_module

cl = require_module("pyopencl", "pyopencl (the OpenCL runtime, PoCL here)")

pytestmark = pytest.mark.integration

SHAPE = (1, 6, 6, 4)


@pytest.fixture(scope="module")
def devices():
    from delegate_runtime.gpu.opencl.runtime import list_devices

    found = list_devices()
    require(bool(found), "an OpenCL device (a GPU driver or PoCL)")
    return found


@pytest.fixture(scope="module")
def context(devices):
    return cl.Context([devices[0][2]])


def mixed_model(bias: bool = False) -> bytes:
    """CONV_2D -> RELU -> LOG_SOFTMAX (not a GPU op: two partitions) -> ADD -> LOGISTIC;
    `bias` gives the CONV_2D one (LiteRT's kernels require it, ours do not)."""
    rng = np.random.default_rng(0)
    b = ModelBuilder()
    g = b.main
    x = g.input("x", SHAPE)
    w = g.const("w", rng.standard_normal((4, 3, 3, 4)).astype(np.float32) * 0.3)
    conv_bias = g.const("bias", rng.standard_normal(4).astype(np.float32) * 0.1) if bias else -1
    t0, t1, t2, t3, y = (g.tensor(n, SHAPE) for n in ("conv", "relu", "log_softmax", "add", "y"))
    g.op("CONV_2D", [x, w, conv_bias], [t0], padding="SAME", stride_h=1, stride_w=1)
    g.op("RELU", [t0], [t1])
    g.op("LOG_SOFTMAX", [t1], [t2])
    g.op("ADD", [t2, x], [t3])
    g.op("LOGISTIC", [t3], [y])
    g.output(y)
    return b.build()


# -- errors with names -----------------------------------------------------------------------


def test_absurd_buffer_is_a_named_device_error(context):
    from delegate_runtime.gpu.opencl.runtime import guarded

    def allocate():
        buf = cl.Buffer(context, cl.mem_flags.READ_WRITE, 1 << 62)
        q = cl.CommandQueue(context)
        cl.enqueue_fill_buffer(q, buf, np.uint8(0), 0, 1 << 62).wait()  # lazily-allocating drivers
        return buf

    with pytest.raises(DeviceError) as info:
        guarded("allocating a huge buffer", allocate)
    text = str(info.value)
    assert "allocating a huge buffer" in text
    assert any(
        n in text
        for n in (
            "CL_INVALID_BUFFER_SIZE",
            "CL_MEM_OBJECT_ALLOCATION_FAILURE",
            "CL_OUT_OF_RESOURCES",
        )
    ), text
    assert info.value.retryable
    assert isinstance(info.value.__cause__, cl.Error)


def test_build_failure_is_named(context, devices):
    from delegate_runtime.gpu.opencl.runtime import guarded

    with pytest.raises(DeviceError, match="CL_BUILD_PROGRAM_FAILURE"):
        guarded(
            "building a broken kernel",
            lambda: cl.Program(context, "__kernel void k( { }").build(devices=[devices[0][2]]),
        )


def one_kernel(context, source: str, name: str, nbytes: int) -> tuple:
    """A queue, a buffer of `nbytes` and kernel `name` of `source` bound to it."""
    kernel = cl.Kernel(cl.Program(context, source).build(), name)
    buf = cl.Buffer(context, cl.mem_flags.READ_WRITE, nbytes)
    kernel.set_args(buf)
    return cl.CommandQueue(context), buf, kernel


SET_ONES = "__kernel void k(__global int* x) { x[get_global_id(0)] = 1; }"


def test_bad_work_group_size_is_named(context):
    from delegate_runtime.gpu.opencl.runtime import guarded

    q, _, kernel = one_kernel(context, SET_ONES, "k", 4 * 10)
    with pytest.raises(DeviceError, match=r"CL_INVALID_WORK_GROUP_SIZE|CL_INVALID_WORK_ITEM_SIZE"):
        guarded("launching", lambda: cl.enqueue_nd_range_kernel(q, kernel, (10,), (3,)).wait())


def test_bad_work_group_size_on_the_hot_path_is_named(context):
    from delegate_runtime.gpu.opencl.capi import CLCallError, opencl_library
    from delegate_runtime.gpu.opencl.hot_path import HotPath
    from delegate_runtime.gpu.opencl.runtime import device_error

    lib = opencl_library()
    require(lib is not None, "the OpenCL ICD loader for direct calls")
    q, _, kernel = one_kernel(context, SET_ONES, "k", 4 * 10)
    hot = HotPath(lib, q, [(kernel, (10,), (3,))])
    with pytest.raises(CLCallError) as caught:
        hot.enqueue(flush_every=1)
    hot.finish()
    assert "clEnqueueNDRangeKernel" in str(caught.value)
    named = device_error(caught.value, "running the GPU partition")
    assert isinstance(named, DeviceError)
    assert re.search(r"CL_INVALID_WORK_GROUP_SIZE|CL_INVALID_WORK_ITEM_SIZE", str(named))


def test_hot_path_copies_round_trip(context):
    from delegate_runtime.gpu.opencl.capi import opencl_library
    from delegate_runtime.gpu.opencl.hot_path import HotPath

    lib = opencl_library()
    require(lib is not None, "the OpenCL ICD loader for direct calls")
    twice = "__kernel void twice(__global float* x) { x[get_global_id(0)] *= 2.0f; }"
    q, buf, kernel = one_kernel(context, twice, "twice", 4 * 64)
    hot = HotPath(lib, q, [(kernel, (64,), (16,)), (kernel, (64,), None)])
    x = np.arange(64, dtype=np.float32)
    out = np.empty_like(x)
    hot.write(buf, x)
    hot.enqueue(flush_every=1)
    hot.launch(1)  # one launch alone (bench/diag_gpu.py --only enqueue times it)
    hot.read(buf, out)
    hot.finish()
    np.testing.assert_array_equal(out, 8 * x)


def test_bad_work_group_size_of_one_launch_is_named(context):
    from delegate_runtime.gpu.opencl.capi import CLCallError, opencl_library
    from delegate_runtime.gpu.opencl.hot_path import HotPath

    lib = opencl_library()
    require(lib is not None, "the OpenCL ICD loader for direct calls")
    q, _, kernel = one_kernel(context, SET_ONES, "k", 4 * 10)
    hot = HotPath(lib, q, [(kernel, (10,), (3,))])
    with pytest.raises(CLCallError, match="clEnqueueNDRangeKernel"):
        hot.launch(0)
    hot.finish()


@pytest.mark.parametrize(
    "code,name",
    [
        (-4, "CL_MEM_OBJECT_ALLOCATION_FAILURE"),
        (-5, "CL_OUT_OF_RESOURCES"),
        (-61, "CL_INVALID_BUFFER_SIZE"),
        (-9999, "CL_ERROR_-9999"),
    ],
)
def test_error_codes_get_their_names(code, name):
    from delegate_runtime.gpu.opencl.runtime import cl_error_name

    assert cl_error_name(code) == name


# -- device selection ------------------------------------------------------------------------


def test_select_by_index(devices):
    from delegate_runtime.gpu.opencl.runtime import select_device

    pi, di, dev = devices[-1]
    assert select_device(f"{pi}:{di}").int_ptr == dev.int_ptr


def test_select_by_name_is_case_insensitive(devices):
    from delegate_runtime.gpu.opencl.runtime import describe, select_device

    dev = devices[0][2]
    fragment = dev.name.strip()[-4:].upper()
    assert describe(select_device(fragment)).name == dev.name.strip()


def test_select_by_key(devices):
    from delegate_runtime.gpu.opencl.runtime import describe, select_device

    info = describe(devices[0][2])
    assert describe(select_device(info.key)).key == info.key


def test_default_prefers_a_gpu(devices):
    from delegate_runtime.gpu.opencl.runtime import describe, select_device

    infos = [describe(d) for _, _, d in devices]
    want = next((i for i in infos if i.is_gpu), infos[0])
    assert describe(select_device(None)).key == want.key


@pytest.mark.parametrize("spec", ["99:0", "0:99", "no-such-device-xyz"])
def test_bad_spec_is_a_job_error_listing_devices(devices, spec):
    from delegate_runtime.gpu.opencl.runtime import select_device

    with pytest.raises(JobError) as info:
        select_device(spec)
    text = str(info.value)
    assert spec in text
    for pi, di, d in devices:
        assert f"{pi}:{di} {d.name.strip()}" in text


def test_session_with_a_bad_device_is_a_job_error(devices):
    from delegate_runtime.gpu.delegate import GpuSession

    with pytest.raises(JobError, match="no OpenCL device"):
        GpuSession(read_model(mixed_model()), device="no-such-device-xyz", log=io.StringIO())


def test_sessions_share_the_process_context_of_their_device(devices):
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.opencl.runtime import shared_context

    model = read_model(mixed_model())
    first = GpuSession(model, device="0:0", log=io.StringIO())
    second = GpuSession(model, device="0:0", log=io.StringIO())
    assert first.ctx is second.ctx is shared_context(devices[0][2])
    assert first.queue is not second.queue
    assert second.init_phases_ms["context"] < 50  # no new context: the driver's cost is paid once


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_copies_through_pinned_memory_match_the_reference(devices, monkeypatch, precision):
    """On a GPU inputs and outputs go through page-locked arrays; forced here on any device."""
    from dataclasses import replace

    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.opencl import preparation

    real = preparation.describe  # the session's device facts, as its preparation reads them
    monkeypatch.setattr(preparation, "describe", lambda d: replace(real(d), is_gpu=True))
    model = read_model(mixed_model())
    session = GpuSession(model, precision=precision, device="0:0", log=io.StringIO())
    assert all(ex.pinned and ex.pinned_out for ex in session.executors)
    assert not session._whole_graph  # LOG_SOFTMAX stays on the CPU: the per-node walk
    rng = np.random.default_rng(3)
    tol = 2e-2 if precision == "fp16" else 1e-5
    results, wants = [], []
    for _ in range(3):  # the pinned arrays are reused: every run sees its own input
        x = rng.standard_normal(SHAPE).astype(np.float32)
        wants.append(Interpreter(model).invoke([x])[0])
        results.append(session.invoke([x])[0])
    for got, want in zip(results, wants, strict=True):  # and earlier results are not overwritten
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_fully_delegated_model_skips_the_node_walk_and_matches_the_reference(devices):
    from delegate_runtime.gpu.delegate import GpuSession

    rng = np.random.default_rng(0)
    b = ModelBuilder()
    g = b.main
    x = g.input("x", SHAPE)
    w = g.const("w", rng.standard_normal((4, 3, 3, 4)).astype(np.float32) * 0.3)
    t0, y = g.tensor("conv", SHAPE), g.tensor("y", SHAPE)
    g.op("CONV_2D", [x, w, -1], [t0], padding="SAME", stride_h=1, stride_w=1)
    g.op("LOGISTIC", [t0], [y])
    g.output(y)
    model = read_model(b.build())
    session = GpuSession(model, device="0:0", log=io.StringIO())
    assert session._whole_graph
    inp = rng.standard_normal(SHAPE).astype(np.float32)
    want = Interpreter(model).invoke([inp])[0]
    np.testing.assert_allclose(session.invoke([inp])[0], want, rtol=1e-5, atol=1e-5)
    with pytest.raises(JobError):
        session.invoke([inp, inp])


def test_session_on_a_named_device(devices):
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.opencl.runtime import describe

    name = describe(devices[0][2]).name
    session = GpuSession(read_model(mixed_model()), device=name, log=io.StringIO())
    assert session.device_facts["model"] == name
    assert session.device_facts["kind"] == "opencl"


def test_bad_options_are_job_errors():
    from delegate_runtime.gpu.delegate import GpuSession

    model = read_model(mixed_model())
    with pytest.raises(JobError, match="precision"):
        GpuSession(model, precision="fp64", log=io.StringIO())
    with pytest.raises(JobError, match="max_delegated_partitions"):
        GpuSession(model, max_delegated_partitions=-1, log=io.StringIO())


# -- mixed execution -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mixed(devices):
    from delegate_runtime.gpu.delegate import GpuSession

    model = read_model(mixed_model())
    log = io.StringIO()
    session = GpuSession(model, precision="fp32", log=log, max_delegated_partitions=2)
    return model, session, log.getvalue()


def test_mixed_execution_prints_tflites_lines(mixed):
    _, _, log = mixed
    lines = log.splitlines()
    assert lines[:-1] == [
        "INFO: Following operations are not supported by GPU delegate:",
        "INFO: LOG_SOFTMAX: Operation is not supported.",
        "INFO: 4 operations will run on the GPU, and the remaining 1 operations will run on the CPU.",
        "INFO: Replacing 4 out of 5 node(s) with delegate (TfLiteGpuDelegateV2) node, "
        "yielding 3 partitions for the whole graph.",
    ]
    # ours: what runs the CPU's nodes, on the threads that ran them fastest (cpu_threads.py)
    assert re.fullmatch(
        r"INFO: CPU node 2: LiteRT's CPU runtime \(XNNPACK, [12] threads?\)", lines[-1]
    )


def test_mixed_execution_facts(mixed):
    _, session, _ = mixed
    d = session.delegation
    assert (d.total_nodes, d.delegated_nodes, d.partitions) == (5, 4, [[0, 1], [3, 4]])
    assert [(u.node, u.op) for u in d.unsupported] == [(2, "LOG_SOFTMAX")]
    assert len(session.executors) == 2 and session.memory_bytes > 0


def test_mixed_execution_matches_the_reference(mixed):
    model, session, _ = mixed
    x = np.random.default_rng(5).uniform(-1, 1, SHAPE).astype(np.float32)
    want = Interpreter(model).invoke([x])[0]
    for _ in range(2):  # buffers are reused between invokes
        np.testing.assert_allclose(session.invoke([x])[0], want, rtol=1e-4, atol=1e-5)


def test_default_keeps_one_partition_and_runs_the_rest_on_the_cpu(devices):
    from delegate_runtime.gpu.delegate import GpuSession

    model = read_model(mixed_model())
    log = io.StringIO()
    session = GpuSession(model, precision="fp16", log=log)
    assert session.delegation.partitions == [[0, 1]]
    assert (
        "2 operations will run on the GPU, and the remaining 3 operations will run on the CPU."
        in (log.getvalue())
    )
    x = np.random.default_rng(6).uniform(-1, 1, SHAPE).astype(np.float32)
    want = Interpreter(model).invoke([x])[0]
    np.testing.assert_allclose(session.invoke([x])[0], want, rtol=2e-2, atol=2e-2)


def test_wrong_input_shape_is_a_job_error(mixed):
    _, session, _ = mixed
    with pytest.raises(JobError):
        session.invoke([np.zeros((1, 5, 6, 4), np.float32)])


def test_op_profile_names_the_gpu_nodes(devices):
    from delegate_runtime.gpu.delegate import GpuSession

    model = read_model(mixed_model())
    session = GpuSession(model, log=io.StringIO(), max_delegated_partitions=2, profiling=True)
    session.invoke([np.zeros(SHAPE, np.float32)])
    profile = session.op_profile_ns()
    assert set(profile) == {0, 1, 3, 4}
    assert all(ns >= 0 for ns in profile.values())
