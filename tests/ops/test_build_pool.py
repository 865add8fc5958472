"""Resident builders (gpu/opencl/build_pool.py) on a real OpenCL device: a session finds
them and starts no process; idle, they give their contexts up and a job wakes them; they
leave with the process that started them."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time

import numpy as np

from delegate_runtime import litert
from labkit.processes import wait_until
from tests.conftest import require, require_module
from tests.ops.test_gpu_ops import opencl_device

require_module("pyopencl", "pyopencl (the GPU delegate's OpenCL binding)")

__all__ = ["opencl_device"]


def _litert_reference(raw: bytes, xs: list[np.ndarray]) -> np.ndarray:
    """The model's output on LiteRT's reference kernels (the oracle)."""
    require(litert.available(), "ai-edge-litert (the LiteRT oracle)")
    return litert.run(raw, xs, reference=True)[0]


def _one_build_per_process(monkeypatch, opencl_device) -> str:
    """Take this device's platform for one that compiles one program per process (NVIDIA's
    kind: the only kind that uses builders); its 'P:D' spec."""
    from delegate_runtime.gpu.opencl import build_workers
    from delegate_runtime.gpu.opencl.runtime import describe, select_device

    device = select_device(opencl_device)
    monkeypatch.setattr(build_workers, "ONE_BUILD_PER_PROCESS", (describe(device).platform,))
    monkeypatch.setenv("DEVICEFARM_GPU_SPECIALIZE", "1")
    return build_workers.device_spec(device)


def test_a_new_model_is_built_by_the_resident_builders(tmp_path, monkeypatch, opencl_device):
    from delegate_runtime import read_model
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.opencl import build_pool, build_workers
    from tests.ops.test_gpu_persistent import separable_blocks

    spec = _one_build_per_process(monkeypatch, opencl_device)
    ran = []
    build = build_workers.build_in_workers
    monkeypatch.setattr(
        build_workers, "build_in_workers", lambda *a: ran.append(build(*a)) or ran[-1]
    )
    procs = build_pool.start_pool(spec, tmp_path, 2)
    spool = build_pool.spool_dir(tmp_path, spec)
    try:
        assert build_pool.live_builders(spool) == 2
        raw, xs = separable_blocks(blocks=1)
        model = read_model(raw)
        kw = {"log": io.StringIO(), "serialization_dir": str(tmp_path), "build_jobs": 3}
        cold = GpuSession(model, **kw)
        assert ran == [(3, 0, 2)]  # three units, no process started, two builders found
        assert cold.program_summary == "3 units, 3 built (2 resident + session)"
        left = [json.loads((d / "job.json").read_text()) for d in (spool / "jobs").iterdir()]
        assert all(job.get("unattended") for job in left)  # its job retired (a first tier's
        # units may wait for the builders: gpu/opencl/first_tier.py leave_for_builders)
        want = _litert_reference(raw, xs)
        np.testing.assert_allclose(cold.invoke(xs)[0], want, rtol=1e-4, atol=1e-4)
        assert GpuSession(model, **kw).program_summary == "3 units from cache"
    finally:
        build_pool.stop_pool(procs)
    assert build_pool.live_builders(spool) == 0 and not list(spool.glob("*.alive"))


def test_idle_builders_give_their_contexts_up_and_a_job_wakes_them(
    tmp_path, monkeypatch, opencl_device
):
    from delegate_runtime import read_model
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.opencl import build_pool
    from tests.ops.test_gpu_persistent import separable_blocks

    spec = _one_build_per_process(monkeypatch, opencl_device)
    procs = build_pool.start_pool(spec, tmp_path, 3, idle_release_s=0.5, keep_held=1)
    spool = build_pool.spool_dir(tmp_path, spec)
    try:
        assert build_pool.holding_builders(spool) == 3  # started with their contexts
        wait_until(
            lambda: build_pool.holding_builders(spool) == 1, 20, "all but one to give up", 0.05
        )
        time.sleep(1.0)
        assert build_pool.holding_builders(spool) == 1
        assert build_pool.live_builders(spool) == 3  # the processes stay
        raw, xs = separable_blocks(blocks=1)
        model = read_model(raw)
        kw = {"log": io.StringIO(), "serialization_dir": str(tmp_path), "build_jobs": 3}
        session = GpuSession(model, **kw)
        assert session.program_summary.startswith("3 units, 3 built (")
        assert "resident" in session.program_summary  # woken, they built some of them
        want = _litert_reference(raw, xs)
        np.testing.assert_allclose(session.invoke(xs)[0], want, rtol=1e-4, atol=1e-4)
        wait_until(
            lambda: build_pool.holding_builders(spool) == 1, 20, "them to give up again", 0.05
        )
    finally:
        build_pool.stop_pool(procs)
    assert not list(spool.glob("*.context"))


def _one_unit_job(tmp_path, opencl_device) -> tuple:
    """A spool with a job of one unit, and a builder's context on the device (not made)."""
    from delegate_runtime.gpu.opencl import build_pool
    from delegate_runtime.gpu.opencl.build_workers import device_spec
    from delegate_runtime.gpu.opencl.runtime import describe, select_device

    device = select_device(opencl_device)
    spool = build_pool.spool_dir(tmp_path, device_spec(device))
    spool.mkdir(parents=True)
    units = ["__kernel void one(__global float* x) { x[get_global_id(0)] = 1.0f; }"]
    job = {"cache": str(tmp_path / "k"), "token": "t", "options": "", "units": units}
    job_file = build_pool.post_job(spool, job)
    return build_pool.BuilderContext(spool, device), describe(device), job, job_file


def test_a_builder_keeps_no_hold_on_a_context_it_gave_up(tmp_path, opencl_device):
    import weakref

    context, info, job, job_file = _one_unit_job(tmp_path, opencl_device)
    assert context.build(info, job, job_file) == 0  # built: none failed
    assert (job_file.parent / "claims" / "0.done").exists() and context.mark.exists()
    made = weakref.ref(context.ctx)
    context.release()
    assert made() is None  # nothing the build made keeps it: the driver's context is gone
    assert not context.mark.exists()


def test_a_builder_the_driver_refuses_a_context_claims_nothing(
    tmp_path, monkeypatch, opencl_device
):
    from delegate_runtime.gpu.opencl import capi

    context, info, job, job_file = _one_unit_job(tmp_path, opencl_device)

    def refused(lib, device):  # type: ignore[no-untyped-def]
        raise capi.CLCallError(-6, "clCreateContext")  # CL_OUT_OF_HOST_MEMORY

    monkeypatch.setattr(capi, "create_context", refused)
    assert context.build(info, job, job_file) is None
    assert not any((job_file.parent / "claims").iterdir())  # the units left to others
    assert context.ctx is None and not context.mark.exists()


def test_builders_leave_with_the_process_that_started_them(tmp_path, opencl_device):
    from delegate_runtime.gpu.opencl import build_pool
    from delegate_runtime.gpu.opencl.build_workers import device_spec
    from delegate_runtime.gpu.opencl.runtime import select_device

    spec = device_spec(select_device(opencl_device))
    starter = (
        "import os, sys; from pathlib import Path;"
        "from delegate_runtime.gpu.opencl.build_pool import start_pool;"
        f"start_pool({spec!r}, Path({str(tmp_path)!r}), 1); print('started', flush=True);"
        "os._exit(0)"  # gone without stopping them
    )
    out = subprocess.run([sys.executable, "-c", starter], capture_output=True, text=True)
    assert out.stdout.strip() == "started", out.stderr[-2000:]
    spool = build_pool.spool_dir(tmp_path, spec)
    deadline = time.monotonic() + 10
    while list(spool.glob("*.alive")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not list(spool.glob("*.alive"))  # the builder saw its parent go and left


def test_a_builder_that_cannot_start_is_reported(tmp_path):
    import pytest

    from delegate_runtime.gpu.opencl import build_pool

    with pytest.raises(RuntimeError, match="resident builders for 9:9 did not start"):
        build_pool.start_pool("9:9", tmp_path, 1)


def test_a_sessions_job_goes_before_the_unattended_and_those_a_unit_at_a_time(
    tmp_path, opencl_device
):
    """Builders look at the jobs a session waits for first, each kind oldest first, and
    build an unattended job's units one at a time (a warm-up of 186 units must not hold
    a model's own units back)."""
    from delegate_runtime.gpu.opencl import build_pool, tier_warm_up

    context, info, job, job_file = _one_unit_job(tmp_path, opencl_device)
    spool = job_file.parent.parent.parent
    one = job["units"][0]
    unattended = {**job, "units": [one, one.replace("one", "two")], "unattended": True}
    warm_up = build_pool.post_job(spool, unattended)
    later = build_pool.post_job(spool, job)
    order = [f for f, _ in build_pool.waiting_first(spool / "jobs")]
    assert order[-1] == warm_up and set(order[:2]) == {job_file, later}
    assert context.build(info, unattended, warm_up, most=1) == 0
    assert sorted(p.name for p in (warm_up.parent / "claims").iterdir()) == ["0", "0.done"]
    assert tier_warm_up.units_left(spool) == 1  # what `build-pool --warm-tier` waits on
