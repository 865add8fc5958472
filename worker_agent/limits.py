"""Per-job memory limit: one model cannot take the host down (issue 16, point 8).

While a job runs, the address space of the process running it (the consumer's pool child)
may grow by at most `DEVICEFARM_JOB_MEMORY_MB` (default 4096; 0 turns the limit off) over
what it had when the job began: RLIMIT_AS, set before the job and put back after it. An
allocation past it fails inside the job (numpy raises MemoryError); the executor ends the
job `failed` with the limit in the reason, and the process goes on to the next job. The
job's time limit is Celery's soft limit (the job fails as timed out) and hard limit.

GPU drivers reserve far more address space than they use (NVIDIA's reserves tens of GiB
when its first context opens), so a limit taken before the driver starts starves it. The
runner's runtime is therefore opened before the limit's base is read (`under_job_limits`):
the driver's reservation is part of the base, measured and reported, and the budget bounds
what the model allocates. Canaries run under the same guard as jobs, so a device whose
driver cannot start under it fails its canary instead of every job.

RLIMIT_AS bounds a whole process: a device group (worker_agent.group), whose devices' jobs
run on threads of one process, runs them without it (`memory=False`; no-op devices and
phones, whose models run on the phone) and records a limit of 0.
"""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

ENV_JOB_MEMORY_MB = "DEVICEFARM_JOB_MEMORY_MB"
DEFAULT_JOB_MEMORY_MB = 4096
_PAGE = os.sysconf("SC_PAGE_SIZE")


def job_memory_mb() -> int:
    """The per-job memory budget in MiB (0: no limit)."""
    raw = os.environ.get(ENV_JOB_MEMORY_MB, "").strip()
    return int(raw) if raw else DEFAULT_JOB_MEMORY_MB


def address_space_bytes() -> int:
    """This process's virtual size now (Linux: /proc/self/statm)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * _PAGE


@contextlib.contextmanager
def memory_limit(budget_mb: int) -> Iterator[int]:
    """Cap this process's address space at its current size + `budget_mb` MiB for the
    block; yields the cap in bytes (0 when off or unsupported)."""
    if budget_mb <= 0 or not os.path.exists("/proc/self/statm"):
        yield 0
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = address_space_bytes() + (budget_mb << 20)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield cap
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@dataclass
class RuntimeOpened:
    """What opening a runner's runtime cost this process, once (the first call pays)."""

    process_us: int = 0  #: modules, the device's context (benchmark's init_process_us)
    driver_reserved_mb: float = 0.0  #: address space the opening added (the driver's)


#: Per process: device key -> what opening its runtime cost (paid once).
_OPENED: dict[str, RuntimeOpened] = {}


def open_runtime(runner: Any) -> RuntimeOpened:
    """Open `runner`'s runtime in this process outside any limit (idempotent) and measure
    the address space it reserved. Raises what the runner raises (DeviceError)."""
    key = runner.device.key
    if key not in _OPENED:
        before = address_space_bytes() if os.path.exists("/proc/self/statm") else 0
        process_us = runner.open_runtime()
        after = address_space_bytes() if before else 0
        _OPENED[key] = RuntimeOpened(process_us, max(0, after - before) / (1 << 20))
    return _OPENED[key]


@contextlib.contextmanager
def under_job_limits(runner: Any, memory: bool = True) -> Iterator[RuntimeOpened]:
    """The conditions every job and canary runs under: the runner's runtime opened first,
    then (unless `memory` is False: a device group's threads) the memory limit over what
    the process (driver included) holds."""
    opened = open_runtime(runner)
    with memory_limit(job_memory_mb() if memory else 0):
        yield opened


def over_limit_message(budget_mb: int) -> str:
    return (
        f"MemoryError: the job needed more than its memory limit ({budget_mb} MiB over the "
        f"worker's own size; {ENV_JOB_MEMORY_MB} sets it)"
    )
