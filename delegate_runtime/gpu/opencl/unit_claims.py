"""A job's program units claimed by builders: the session, its worker processes and the
resident builders (build_workers.py, build_pool.py). A claim file per unit, made with
O_EXCL so one builder takes each, holds the claimer's pid; a `.done` mark follows each
attempt, built or failed, so whoever waits knows when a unit needs no more waiting."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

from .cache import KernelCache
from .program import program_key
from .runtime import DeviceInfo

#: How often a waiting session looks at the claims, and an idle builder for jobs (s).
POLL_S = 0.01


def claim(job_file: Path, index: int) -> bool:
    """Whether this builder is the first to take unit `index` of the job (its pid in the
    claim, for claim_settled)."""
    try:
        fd = os.open(job_file.parent / "claims" / str(index), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    try:
        os.write(fd, str(os.getpid()).encode())
    finally:
        os.close(fd)
    return True


def has_unclaimed(job: dict, job_file: Path) -> bool:
    """Whether some unit of `job` is not claimed yet."""
    claims = job_file.parent / "claims"
    return any(not (claims / str(i)).exists() for i in range(len(job["units"])))


def not_done(job: dict, job_file: Path) -> int:
    """Units of `job` neither built nor failed yet (without their `.done` mark)."""
    claims = job_file.parent / "claims"
    return sum(not (claims / f"{i}.done").exists() for i in range(len(job["units"])))


def all_done(job: dict, job_file: Path) -> bool:
    """Whether every unit of `job` was built or failed (its `.done` mark)."""
    return not not_done(job, job_file)


def mark_done(job_file: Path, index: int) -> None:
    """Unit `index` was built, or failed to: nothing more to wait for (its claim stays)."""
    with contextlib.suppress(OSError):  # a job retired meanwhile
        (job_file.parent / "claims" / f"{index}.done").touch()


def build_claimed(
    lib: Any,
    ctx: Any,
    device: Any,
    info: DeviceInfo,
    cache: KernelCache,
    job: dict,
    path: Path,
    most: int | None = None,
) -> int:
    """Build every unit of `job` that no other builder has claimed (at most `most`), in the
    job's order, and store each in the cache; the count that failed."""
    from .program import build_raw

    failed = taken = 0
    for index, unit in enumerate(job["units"]):
        if most is not None and taken >= most:
            break
        if claim(path, index):
            taken += 1
            key = program_key(info, job["token"], unit, job["options"])
            try:
                failed += bool(
                    build_raw(lib, ctx, device, info, cache, key, unit, job["options"]).err
                )
            finally:
                mark_done(path, index)
    return failed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def claim_settled(claims: Path, index: int) -> bool:
    """Whether unit `index` needs no more waiting: built or failed (`.done`), or claimed by
    a process that is gone (an unreadable claim counts as gone once it is a second old)."""
    if (claims / f"{index}.done").exists():
        return True
    path = claims / str(index)
    try:
        text = path.read_text().strip()
        if text:
            return not _pid_alive(int(text))
        return time.time() - path.stat().st_mtime > 1.0
    except (OSError, ValueError):
        return True


def await_claims(job_file: Path, count: int, deadline: float) -> int:
    """Wait until each of the job's `count` units is settled (claim_settled) or the
    monotonic `deadline` passes; the units still unsettled."""
    claims = job_file.parent / "claims"
    waiting = set(range(count))
    while waiting:
        waiting = {i for i in waiting if not claim_settled(claims, i)}
        if not waiting or time.monotonic() >= deadline:
            break
        time.sleep(POLL_S)
    return len(waiting)
