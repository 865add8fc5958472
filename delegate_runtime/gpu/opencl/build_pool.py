"""Resident builders: a host's program builders kept running (their OpenCL contexts held, or
given up while idle and made again when work comes), so that a new model's units are
built without starting a process.

A cold session's own build workers (build_workers.py) cost 1-2.5 s on an H200 before
their first unit: Python, pyopencl and a context each, and NVIDIA makes contexts one at
a time across processes (8 at once: 2.5 s). A lab agent lives for days, so it starts
the builders once (`start_pool`, the agent serving the GPU or `devicefarm build-pool`)
and they wait on a spool inside the kernel cache, `<cache>/build-pool/<P_D>/`. A session
that finds live builders there (a heartbeat file each, touched every HEARTBEAT_S) posts
its job in the spool's `jobs/` instead of a temporary folder, builds beside them and
starts only the processes they fall short of. A job marked `unattended` (a first tier's
units left for later models, first_tier.leave_for_builders, or its warm-up at the
builders' start, tier_warm_up.py) has no session waiting: the builders that keep their
contexts build it a unit at a time after the sessions' jobs, and the one that finds all
its units done retires it. Units are claimed as build_workers claims
them, the claimer's pid in the claim and a `.done` mark after each attempt, so the
session waits (`await_claims`) until every unit is done or its claimer is gone; whatever
is then missing from the cache it builds itself. Builders share the cache's driver
caches (CUDA_CACHE_PATH), so the session loads their machine code, not their PTX.
A builder exits when the process that started it does.

All but `keep_held` builders (KEEP_HELD by default) give their contexts up after
`idle_release_s` without a unit to build (IDLE_RELEASE_S), keeping their processes,
imports and platform: NVIDIA makes a new context slower for every other one alive (beside
15 idle builders' contexts a warm start's took 212-232 ms against 120-130 alone, beside 4
137-145; `bench/diag_idle_contexts.py`), and a lab's jobs are mostly warm starts. A job with
unclaimed units wakes them; they make their contexts again one at a time (the spool's
`context.lock`: 15 at once all waited 2.7 s, one at a time the first is ready in ~120 ms)
beside the builders that kept theirs, and mark each held context with a `<pid>.context`
file.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .cache import DRIVER_CACHES, ensure_private_dir
from .unit_claims import POLL_S, build_claimed

#: A builder touches its heartbeat file this often (s), from a thread of its own, so a
#: long build does not make it look dead.
HEARTBEAT_S = 0.5
#: A heartbeat older than this (s) is a builder that is gone.
HEARTBEAT_STALE_S = 3.0
#: How long `start_pool` waits for its builders' first heartbeats (s).
START_TIMEOUT_S = 60.0
#: A job still in the spool after this long (s) was left by a session that died: removed.
JOB_MAX_AGE_S = 3600.0
#: An idle builder gives its OpenCL context up after this long without a unit (s): a
#: campaign's new models come close together, its warm starts after them.
IDLE_RELEASE_S = 15.0
#: The module a builder's process runs (its `serve`, and the warm-up where asked).
BUILDER_MODULE = f"{__package__}.builder_process"
#: Builders that keep their contexts however long idle: a new model's build starts on
#: them at once while the others make theirs (4 contexts slow a warm start's by 7-25 ms).
KEEP_HELD = 4


def default_builders() -> int:
    """Builders to keep by default: one per CPU this process may use but one (the session
    builds too), so that with the session they number what a session builds at once at
    most (the switches' max_build_jobs)."""
    from ...host_cpus import usable_cpus
    from ..switches import DEFAULTS

    return max(min(usable_cpus(), DEFAULTS.max_build_jobs) - 1, 0)


def spool_dir(cache_dir: Path, spec: str) -> Path:
    """The spool of device `spec` ('P:D') in the kernel cache `cache_dir`."""
    return Path(cache_dir) / "build-pool" / spec.replace(":", "_")


def live_builders(spool: Path) -> int:
    """Builders whose heartbeat in `spool` is fresh."""
    now = time.time()
    count = 0
    for beat in spool.glob("*.alive") if spool.is_dir() else ():
        with contextlib.suppress(OSError):
            count += now - beat.stat().st_mtime < HEARTBEAT_STALE_S
    return count


def holding_builders(spool: Path) -> int:
    """Live builders in `spool` (a fresh heartbeat) that hold an OpenCL context now."""
    now = time.time()
    count = 0
    for mark in spool.glob("*.context") if spool.is_dir() else ():
        with contextlib.suppress(OSError):
            count += now - (spool / f"{mark.stem}.alive").stat().st_mtime < HEARTBEAT_STALE_S
    return count


def post_job(spool: Path, job: dict) -> Path:
    """Put `job` in the spool (whole: written aside, then renamed in); its job file."""
    jobs = ensure_private_dir(spool / "jobs")
    name = uuid.uuid4().hex
    staging = spool / f".{name}"
    (staging / "claims").mkdir(parents=True)
    (staging / "job.json").write_text(json.dumps(job))
    staging.rename(jobs / name)
    return jobs / name / "job.json"


def retire_job(job_file: Path) -> None:
    """Take a finished job out of the spool (a builder still on it writes nowhere)."""
    shutil.rmtree(job_file.parent, ignore_errors=True)


def builder_env(cache_dir: Path, environ: dict[str, str] | None = None) -> dict[str, str]:
    """A builder's environment: `environ` (this process's), with the drivers' caches
    inside `cache_dir` as the sessions using it have them (unless the user set them)."""
    env = dict(os.environ if environ is None else environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    for variable, subdir in DRIVER_CACHES.items():
        env.setdefault(variable, str(ensure_private_dir(Path(cache_dir) / subdir)))
    return env


def start_pool(
    spec: str,
    cache_dir: Path,
    builders: int,
    environ: dict[str, str] | None = None,
    idle_release_s: float = IDLE_RELEASE_S,
    keep_held: int = KEEP_HELD,
    warm_tier: bool = False,
) -> list[Any]:
    """Start `builders` resident builders for device `spec` on `cache_dir` (their
    environment: builder_env's); return once each has its context (a heartbeat), or raise
    RuntimeError naming why not. All but `keep_held` (at least one: those build what no
    session waits for) give their contexts up after `idle_release_s` idle. `warm_tier`:
    the first posts the first tier's units the cache lacks, for those that keep their
    contexts to build before any model asks (tier_warm_up.py)."""
    spool = ensure_private_dir(spool_dir(cache_dir, spec))
    ensure_private_dir(spool / "jobs")
    before = live_builders(spool)
    keep_held = max(keep_held, 1)
    release = [float("inf")] * keep_held + [idle_release_s] * max(builders - keep_held, 0)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", BUILDER_MODULE, spec, str(cache_dir), str(release[i])]
            + (["warm"] if warm_tier and i == 0 else []),
            env=builder_env(cache_dir, environ),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for i in range(builders)
    ]
    deadline = time.monotonic() + START_TIMEOUT_S
    while live_builders(spool) < before + builders:
        dead = [p for p in procs if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            why = dead[0].stderr.read().decode(errors="replace")[-800:] if dead else "timed out"
            stop_pool(procs)
            raise RuntimeError(f"resident builders for {spec} did not start: {why.strip()}")
        time.sleep(0.05)
    return procs


def stop_pool(procs: list[Any], grace_s: float = 5.0) -> None:
    """Stop builders that start_pool started (each removes its heartbeat)."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def waiting_first(jobs: Path) -> list[tuple[Path, dict]]:
    """The spool's jobs (job file, job), those a session waits for before the unattended,
    each kind oldest first; a job older than JOB_MAX_AGE_S retired (its session died)."""
    found = []
    for job_dir in jobs.iterdir():
        with contextlib.suppress(OSError, ValueError):
            mtime = job_dir.stat().st_mtime
            if time.time() - mtime > JOB_MAX_AGE_S:
                retire_job(job_dir / "job.json")
                continue
            job = json.loads((job_dir / "job.json").read_text())
            found.append((bool(job.get("unattended")), mtime, job_dir / "job.json", job))
    found.sort(key=lambda item: item[:2])
    return [(job_file, job) for _, _, job_file, job in found]


class BuilderContext:
    """A builder's OpenCL context: made when there is work, one builder at a time (the
    spool's lock), given up after a while idle; `<pid>.context` marks it held."""

    def __init__(self, spool: Path, device: Any):
        from .capi import opencl_library

        self.lib, self.device, self.ctx = opencl_library(), device, None
        self.lock = spool / "context.lock"
        self.mark = spool / f"{os.getpid()}.context"

    def held(self) -> Any:
        if self.ctx is None:
            from .capi import create_context

            with open(self.lock, "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                self.ctx = create_context(self.lib, self.device)
            self.mark.touch()
        return self.ctx

    def build(self, info: Any, job: dict, job_file: Path, most: int | None = None) -> int | None:
        """build_claimed in this context (made first if given up; no one else keeps it), at
        most `most` units; None, claiming nothing, where the driver would not make a
        context now: the units are left to the other builders and the session, and the
        next job tries again."""
        from .cache import KernelCache
        from .capi import CLCallError

        try:
            ctx = self.held()
        except (CLCallError, OSError):
            return None
        cache = KernelCache(job["cache"])
        return build_claimed(self.lib, ctx, self.device, info, cache, job, job_file, most)

    def release(self) -> None:
        if self.ctx is not None:
            self.ctx = None
            gc.collect()  # programs built in it go first, then clReleaseContext
            self.mark.unlink(missing_ok=True)


def serve(
    spec: str,
    cache_dir: Path,
    idle_release_s: float = IDLE_RELEASE_S,
    first_jobs: Callable[[Path, Any], None] | None = None,
) -> int:
    """A resident builder: its context made, build the spool's jobs' unclaimed units until
    the process that started it is gone (or SIGTERM); its context given up while idle.
    Jobs a session waits for first; an unattended job's units one at a time between looks
    for them, and only by builders that keep their contexts (`idle_release_s` infinite):
    work no session waits for wakes no context and leaves the host's other cores to its
    jobs. `first_jobs(spool, info)` posts jobs once the context is made (the first tier's
    warm-up: builder_process.py)."""
    import signal

    from .runtime import describe, select_device
    from .unit_claims import all_done, has_unclaimed

    device = select_device(spec)
    info = describe(device)
    spool = spool_dir(cache_dir, spec)
    jobs = ensure_private_dir(spool / "jobs")
    context = BuilderContext(spool, device)
    context.held()  # started hot: an agent's first jobs (its canaries) come at once
    takes_unattended = idle_release_s == float("inf")
    if first_jobs is not None:
        first_jobs(spool, info)
    beat = spool / f"{os.getpid()}.alive"
    parent = os.getppid()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def heartbeat() -> None:
        while not stop.is_set():
            beat.touch()
            stop.wait(HEARTBEAT_S)

    threading.Thread(target=heartbeat, name="heartbeat", daemon=True).start()
    worked = time.monotonic()
    try:
        while not stop.is_set() and os.getppid() == parent:
            for job_file, job in waiting_first(jobs):
                with contextlib.suppress(OSError, ValueError, KeyError):
                    unattended = bool(job.get("unattended"))
                    if unattended and not takes_unattended:
                        continue
                    if has_unclaimed(job, job_file):
                        context.build(info, job, job_file, most=1 if unattended else None)
                        worked = time.monotonic()
                        if unattended:
                            break  # look for a session's job before the next unit
                    if unattended and all_done(job, job_file):
                        retire_job(job_file)  # no session waits to retire it
            if time.monotonic() - worked > idle_release_s:
                context.release()
            stop.wait(POLL_S)
    finally:
        stop.set()
        context.release()
        beat.unlink(missing_ok=True)
    return 0
