"""Program units compiled in worker processes, for drivers that compile one program at a
time per process.

NVIDIA's OpenCL compiler holds one lock per process: on an H200, pose_landmark_full's 16
kernel units took 13.5 s one after another, 11.2 s in 16 threads and 4.8 s in 16
processes (process start-up and contexts included; bench/diag_build.py). So where the
driver is such a one, the units the kernel cache lacks are built by workers
(`python -m delegate_runtime.gpu.opencl.build_workers`) and by the session itself, each
storing the binaries in the cache; the driver's compute cache (inherited through
CUDA_CACHE_PATH, cache.point_driver_cache) keeps their machine code too, so the session
then loads every unit from the cache in milliseconds. Units are taken largest first, each
by whichever builder is free (a claim file per unit), and the session starts on the
largest while the workers start up (about 1.1 s each on the H200: Python, pyopencl, a
context). A worker that fails leaves its units to the session, which builds them itself
and reports any error with its log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import build_pool
from .cache import KernelCache
from .program import program_key
from .runtime import DeviceInfo
from .unit_claims import await_claims, build_claimed

#: Platforms whose compiler builds one program at a time in a process (threads queue).
ONE_BUILD_PER_PROCESS = ("NVIDIA CUDA",)


def compiles_one_at_a_time(info: DeviceInfo) -> bool:
    return info.platform in ONE_BUILD_PER_PROCESS


def device_spec(device: Any) -> str:
    """`device` as select_device's 'P:D' (its platform's and its own index)."""
    from .runtime import list_devices

    for pi, di, d in list_devices():
        if d.int_ptr == device.int_ptr:
            return f"{pi}:{di}"
    raise LookupError(f"device {device.name} is not among this host's OpenCL devices")


def unit_job(spec: str, cache: KernelCache, token: str, options: str, units: list[str]) -> dict:
    """A job of `units` for builders (workers or the host's resident ones) of device `spec`,
    stored in `cache` under `token`, built with `options`."""
    return {
        "device": spec,
        "cache": str(cache.dir),
        "token": token,
        "options": options,
        "units": units,
    }


def build_in_workers(
    device: Any,
    info: DeviceInfo,
    cache: KernelCache,
    token: str,
    units: list[str],
    options: str,
    jobs: int,
    ctx: Any = None,
    max_workers: int = 9,
    timeout_s: float = 600.0,
) -> tuple[int, int, int]:
    """Build the `units` that `cache` lacks with up to `jobs` builders: the host's resident
    builders (build_pool.py) where they run, worker processes for the rest (at most
    `max_workers`, each stopped after `timeout_s`: the switches'), and the session itself
    where `ctx` (its context) is given. (units built, worker processes started, resident
    builders found); (0, 0, 0) where fewer than two were missing (the session builds one).
    An entry on disk counts as held: the session reads it whole, and rebuilds a bad one.
    The units still number one per core, taken by whichever builder is free."""
    missing = [u for u in units if not cache.holds(program_key(info, token, u, options))]
    if len(missing) < 2:
        return 0, 0, 0
    missing.sort(key=len, reverse=True)  # the longest builds first: the shortest makespan
    spec = device_spec(device)
    spool = build_pool.spool_dir(cache.dir, spec)
    resident = min(build_pool.live_builders(spool), len(missing))
    builders = min(jobs, len(missing))
    wanted = min(builders - 1 if ctx is not None else builders, max_workers)
    workers = max(wanted - resident, 0)
    if not resident and workers < 1:
        return 0, 0, 0
    job = unit_job(spec, cache, token, options, missing)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    with tempfile.TemporaryDirectory(prefix="units-") as tmp:
        if resident:
            path = build_pool.post_job(spool, job)
        else:
            path = Path(tmp) / "job.json"
            path.write_text(json.dumps(job))
            (Path(tmp) / "claims").mkdir()
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", __name__, str(path)],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for _ in range(workers)
        ]
        if ctx is not None:
            from .capi import opencl_library

            build_claimed(opencl_library(), ctx, device, info, cache, job, path)
        deadline = time.monotonic() + timeout_s
        for proc in procs:
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if resident:
            await_claims(path, len(missing), deadline)
            build_pool.retire_job(path)
    return len(missing), workers, resident


def work(job_file: str) -> int:
    """A worker: build the job's units that no other builder has taken; the exit status
    counts the units that failed."""
    from .capi import opencl_library
    from .runtime import describe, select_device, shared_context

    path = Path(job_file)
    job = json.loads(path.read_text())
    device = select_device(job["device"])
    info, ctx, lib = describe(device), shared_context(device), opencl_library()
    failed = build_claimed(lib, ctx, device, info, KernelCache(job["cache"]), job, path)
    return min(failed, 100)


if __name__ == "__main__":
    sys.exit(work(sys.argv[1]))
