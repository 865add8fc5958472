"""A device's failure streak: jobs that failed on it in a row for the device's reasons.

A device whose last `streak_jobs()` jobs in a row failed for the device's reasons is
quarantined with a reason naming them; its agent retries its canary and, once that passes,
the device is back in service and its streak starts over (the next quarantine comes after
`streak_jobs()` more failures, counting on from the last success).

The device's reasons are attempt outcomes: `device_error` (a DeviceError moved the job:
a tool past its deadline, adb failed, the device lost mid-job) and `device_failed` (the job
ended on a crash of the device's tool or a time limit; the worker decides which endings
these are, worker_agent/failure_streak.py). A success ends a streak; anything else (a model
the CPU reference refuses too, a bad job, a cancel, a lost worker) neither counts nor ends it.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, func, select, update

from delegate_runtime.env_numbers import whole_number

from .jobs import record_attempt
from .schema import QUARANTINED, SUCCEEDED, Attempt, Device, Result

#: Overrides how many failures in a row quarantine a device.
ENV_STREAK_JOBS = "DEVICEFARM_FAILURE_STREAK"
DEFAULT_STREAK_JOBS = 3
#: The attempt outcome of a job that ended on a failure of its device (not moved).
DEVICE_FAILED = "device_failed"
#: Attempt outcomes that count against the device they ran on.
DEVICE_FAULTS = ("device_error", DEVICE_FAILED)
#: Failures read back at most (a longer streak counts as this many).
LOOKBACK_MULTIPLE = 100
#: Characters of each failure's first line quoted in the quarantine reason.
QUOTE_CHARS = 160


def streak_jobs() -> int:
    """Failures in a row that quarantine a device: $DEVICEFARM_FAILURE_STREAK, else
    DEFAULT_STREAK_JOBS."""
    return whole_number(ENV_STREAK_JOBS, DEFAULT_STREAK_JOBS, 1, 1000)


def record_failure(
    conn: Connection,
    device_key: str,
    job_id: int,
    attempt: int,
    worker: str,
    why: str,
    now: datetime,
) -> str:
    """Note that job `job_id` ended on a failure of `device_key`, then `check` it."""
    record_attempt(conn, job_id, attempt, device_key, worker, DEVICE_FAILED, why, now)
    return check(conn, device_key)


def check(conn: Connection, device_key: str, n: int | None = None) -> str:
    """Quarantine `device_key` when its failures since its last success reach a multiple
    of `n` (default `streak_jobs()`); the reason, or "" when it stays as it is."""
    n = n or streak_jobs()
    last_ok = conn.execute(
        select(func.max(Result.created_at)).where(
            Result.device_key == device_key, Result.outcome == SUCCEEDED
        )
    ).scalar()
    where = [Attempt.device_key == device_key, Attempt.outcome.in_(DEVICE_FAULTS)]
    if last_ok is not None:
        where.append(Attempt.at > last_ok)
    failures = conn.execute(
        select(Attempt.job_id, Attempt.reason)
        .where(*where)
        .order_by(Attempt.at.desc(), Attempt.id.desc())
        .limit(n * LOOKBACK_MULTIPLE)
    ).all()
    if not failures or len(failures) % n:
        return ""
    jobs = "1 job" if n == 1 else f"{n} jobs"
    why = f"{jobs} in a row failed on this device: " + "; ".join(
        f"job {job_id}: {_first_line(reason)}" for job_id, reason in reversed(failures[:n])
    )
    done = conn.execute(
        update(Device)
        .where(Device.key == device_key, Device.health != QUARANTINED)
        .values(health=QUARANTINED, health_reason=why)
    )
    return why if done.rowcount else ""


def _first_line(text: str) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else "no reason given"
    return line if len(line) <= QUOTE_CHARS else line[: QUOTE_CHARS - 3] + "..."
