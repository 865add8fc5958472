"""Per-job memory limit: one model cannot take the host down (issue 16, point 8).

While a job runs, the address space of the process running it (the consumer's pool child)
may grow by at most `DEVICEFARM_JOB_MEMORY_MB` (default 4096; 0 turns the limit off) over
what it had when the job began: RLIMIT_AS, set before the job and put back after it. An
allocation past it fails inside the job (numpy raises MemoryError); the executor ends the
job `failed` with the limit in the reason, and the process goes on to the next job. The
job's time limit is Celery's soft limit (the job fails as timed out) and hard limit.
"""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Iterator

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


def over_limit_message(budget_mb: int) -> str:
    return (
        f"MemoryError: the job needed more than its memory limit ({budget_mb} MiB over the "
        f"worker's own size; {ENV_JOB_MEMORY_MB} sets it)"
    )
