"""Running one dispatched job on this consumer's device: the body of the Celery task.

claim -> fetch the model -> runner.run -> finish (result + state, once). An error whose
class is `retryable` (infrastructure: DeviceError) sends the job to another matching device
after a backoff; any other DevicefarmError (the user's: ModelError, JobError) fails it; a
soft time limit times it out; anything else is a bug: the job fails with the traceback and
is never retried.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from delegate_runtime.errors import DevicefarmError, JobError, JobTimeout
from farm_core import jobs, user_inputs
from farm_core.configs import stored_config
from farm_core.database import unreachable
from farm_core.schema import (
    FAILED,
    QUARANTINED,
    RUNNING,
    SUCCEEDED,
    TIMED_OUT,
    Campaign,
    Device,
    InputFile,
    StoredModel,
)

from . import failure_streak, job_pace
from .lease import JobLost
from .limits import RuntimeOpened, job_memory_mb, over_limit_message, under_job_limits
from .runners.base import JobSpec, RunOutcome
from .runners.job_progress import JobProgress

if TYPE_CHECKING:
    from .consumer import ConsumerContext

log = logging.getLogger(__name__)

#: Outcomes `execute_job` returns (the task's return value, for logs).
STALE, MOVED, RETRIED = "stale", "moved", "retried"


#: One fetch of a file into the cache at a time per process (a group's devices share it).
_FETCHING = threading.Lock()


def _tmp(path: Path) -> Path:
    """A name of this process and thread's own beside `path`, to write and then rename."""
    return path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")


def model_path(ctx: ConsumerContext, sha256: str) -> Path:
    """The model's file in this host's cache, fetched from the database when missing."""
    path = ctx.cache_dir / "models" / f"{sha256}.tflite"
    if path.exists():
        return path
    with _FETCHING:  # the devices of a group that want one model fetch it once
        return path if path.exists() else _fetch_model(ctx, sha256, path)


def _fetch_model(ctx: ConsumerContext, sha256: str, path: Path) -> Path:
    data = ctx.statements.run(  # the device's own connection: a consumer keeps no pool
        lambda c: c.execute(select(StoredModel.data).where(StoredModel.sha256 == sha256)).scalar()
    )
    if data is None:
        raise JobError(f"model {sha256} is not in the database")
    if hashlib.sha256(data).hexdigest() != sha256:
        raise JobError(f"model {sha256} in the database does not match its hash")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp(path)
    tmp.write_bytes(data)
    tmp.replace(path)
    return path


def input_paths(ctx: ConsumerContext, settings: dict[str, Any]) -> dict[str, Any]:
    """The settings with each user input value file's cached copy as `path` (fetched from
    the database by sha256 when missing; farm_core.user_inputs)."""
    items = settings.get(user_inputs.INPUTS) or []
    if not items:
        return settings
    out = []
    for item in items:
        sha = str(item.get("sha256", ""))
        if not re.fullmatch(r"[0-9a-f]{64}", sha):
            raise JobError(f"input {item.get('layer')!r} has no valid sha256")
        path = ctx.cache_dir / "inputs" / sha
        if not path.exists():
            with ctx.engine.begin() as conn:
                data = conn.execute(select(InputFile.data).where(InputFile.sha256 == sha)).scalar()
            if data is None or hashlib.sha256(data).hexdigest() != sha:
                raise JobError(f"input file {sha} is missing from the database or corrupt")
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = _tmp(path)
            tmp.write_bytes(data)
            tmp.replace(path)
        out.append({**item, "path": str(path)})
    return {**settings, user_inputs.INPUTS: out}


def result_values(outcome: RunOutcome, facts: dict[str, Any], duration_s: float) -> dict:
    """Result columns from what the runner measured."""
    b, d = outcome.benchmark, outcome.diff
    errors = [o.get("avg_error") for o in d.get("outputs", []) if o.get("avg_error") is not None]
    deleg = outcome.delegation
    return {
        "init_us": b.get("init_us"),
        "avg_us": b.get("avg_us"),
        "median_us": b.get("median_us"),
        "p95_us": b.get("p95_us"),
        "max_avg_error": max(errors) if errors else None,
        "delegated_ops": deleg.get("nodes_delegated"),
        "total_ops": deleg.get("nodes_total"),
        "benchmark": _jsonable(b),
        "diff": _jsonable(d),
        "delegation": _jsonable(deleg),
        "device_facts": facts,
        "versions": outcome.versions,
        "log": outcome.log,
        "duration_s": duration_s,
        **measurement_values(b),
    }


def measurement_values(benchmark: dict[str, Any]) -> dict[str, Any]:
    """`measurement` and `config_fingerprint` from the benchmark's record; a tool that
    keeps none (a phone's benchmark_model) gives its timing alone and no fingerprint."""
    record = dict(benchmark.get("measurement") or {})
    if not record and benchmark.get("timing"):
        record = {"timing": benchmark["timing"]}
    return {
        "measurement": _jsonable(record),
        "config_fingerprint": str(record.get("fingerprint") or ""),
    }


def _jsonable(value: Any) -> Any:
    """Plain JSON types (numpy scalars and arrays become floats and lists)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def _note_job_conditions(outcome: RunOutcome, opened: RuntimeOpened, memory: bool) -> None:
    """Add what the job ran under to its measurement: the memory limit (0: none, as in a
    device group) and the address space the driver reserved before it
    (worker_agent.limits)."""
    record = outcome.benchmark.get("measurement")
    if isinstance(record, dict):
        record.setdefault("conditions", {}).update(
            job_memory_mb=job_memory_mb() if memory else 0,
            driver_reserved_mb=round(opened.driver_reserved_mb, 1),
        )


def _settings(ctx: ConsumerContext, campaign_id: int) -> dict[str, Any]:
    cached = ctx.campaign_settings.get(campaign_id)
    if cached is None:
        cached = ctx.statements.run(
            lambda c: c.execute(
                select(Campaign.settings).where(Campaign.id == campaign_id)
            ).scalar_one()
        )
        ctx.campaign_settings[campaign_id] = cached
    return cached


def _move(
    ctx: ConsumerContext, job_id: int, attempt: int, outcome: str, reason: str, count_failure: bool
) -> str:
    with ctx.engine.begin() as conn:
        order = jobs.place(
            conn,
            job_id,
            ctx.timing,
            expect_state=RUNNING,
            expect_attempt=attempt,
            outcome=outcome,
            reason=reason,
            count_failure=count_failure,
            prefer_other=True,
            worker=ctx.worker,
        )
    if order is not None:
        sent, err = ctx.dispatcher.send([order])
        if sent:
            with ctx.engine.begin() as conn:
                jobs.mark_sent(conn, sent)
        elif err:
            log.warning("job %s: re-send failed (%s); the reconciler will send it", job_id, err)
    return RETRIED if count_failure else MOVED


def _quarantined(ctx: ConsumerContext, claimed: jobs.Claimed) -> bool:
    """Whether the database says the device is quarantined (a failure streak written by
    another process of this device, or the reconciler, counts as much as our own flag):
    as read with the claim when it was, else read now."""
    key = ctx.device.key
    if claimed.device_health is not None and claimed.device_key == key:
        return claimed.device_health == QUARANTINED
    health = ctx.statements.run(
        lambda c: c.execute(select(Device.health).where(Device.key == key)).scalar()
    )
    return health == QUARANTINED


@dataclass
class Ran:
    """A claimed job that ran to an end its result records (the finish still to write)."""

    claimed: jobs.Claimed
    state: str
    values: dict[str, Any]
    error: str
    failure: BaseException | None  #: what ended it, for its device's failure streak
    took_s: float


def execute_job(ctx: ConsumerContext, job_id: int, attempt: int) -> str:
    """Run dispatch `attempt` of job `job_id`; returns its outcome (for the task's log)."""
    claimed = ctx.statements.run(
        lambda c: jobs.claim(c, job_id, attempt, ctx.worker, ctx.timing.lease_s)
    )
    if claimed is None:
        return STALE
    ran = run_claimed(ctx, claimed)
    if isinstance(ran, str):
        return ran
    written, ctx.others_out = ctx.statements.run(
        lambda c: jobs.finish_counting(c, job_id, attempt, ctx.worker, ran.state, ran.values)
    )
    ctx.after_job()  # its canary first: a canary that passes would lift a streak's quarantine
    return after_finish(ctx, ran, written)


def after_finish(ctx: ConsumerContext, ran: Ran, written: bool) -> str:
    """What follows a job's finish: its failure in its device's streak; its outcome."""
    if written and ran.failure is not None:
        failure_streak.after_failure(ctx, ran.claimed, ran.state, ran.failure, ran.error)
    return ran.state if written else STALE


def run_claimed(ctx: ConsumerContext, claimed: jobs.Claimed) -> Ran | str:
    """Run a job this worker claimed: what its finish will write, or the outcome of a job
    that ended otherwise (moved, retried, stale: nothing to finish)."""
    from celery.exceptions import SoftTimeLimitExceeded

    job_id, attempt = claimed.job_id, claimed.attempt
    if ctx.quarantined or _quarantined(ctx, claimed):
        return _move(
            ctx,
            job_id,
            attempt,
            "quarantined",
            f"device {ctx.device.key} is quarantined",
            count_failure=False,
        )
    progress = JobProgress(job_id)
    ctx.lease.hold(job_id, attempt, progress.line)  # the lease thread stores its line
    start = time.perf_counter()
    state, error, outcome = SUCCEEDED, "", RunOutcome()
    failure: BaseException | None = None  #: what ended it, for its device's failure streak
    try:
        spec = JobSpec(
            job_id,
            attempt,
            model_path(ctx, claimed.model_sha256),
            claimed.model_sha256,
            stored_config(claimed.config),
            input_paths(ctx, _settings(ctx, claimed.campaign_id)),
            progress,
        )
        memory = not ctx.threaded  # RLIMIT_AS is the process's: none for a group's threads
        with ctx.lease.abortable(), under_job_limits(ctx.runner, memory) as opened:
            outcome = ctx.runner.run(spec)
        _note_job_conditions(outcome, opened, memory)
    except JobLost as exc:  # cancelled or moved meanwhile: nothing to write
        log.warning("job %s: %s", job_id, exc)
        return STALE
    except DevicefarmError as exc:
        if exc.retryable:  # infrastructure's fault: another device may run it
            ctx.lease.release()
            moved = _move(
                ctx,
                job_id,
                attempt,
                "device_error",
                f"{ctx.device.key}: {type(exc).__name__}: {exc}",
                count_failure=True,
            )
            ctx.check_health()  # quarantine at once if the device itself is at fault
            failure_streak.after_device_error(ctx)
            return moved
        state = TIMED_OUT if isinstance(exc, JobTimeout) else FAILED
        failure = exc
        error = f"{type(exc).__name__}: {exc}"
        outcome.log = str(getattr(exc, "log", "") or "")  # e.g. a phone tool's raw output
    except MemoryError:  # past the job's memory limit: the model's fault, not a bug
        state, error = FAILED, over_limit_message(job_memory_mb())
    except SoftTimeLimitExceeded as exc:
        state, error, failure = TIMED_OUT, "the job ran past its soft time limit", exc
    except Exception as exc:  # noqa: BLE001 - a bug: record it, never retry it
        if unreachable(exc):
            raise  # not the job's fault: the task puts it back on the queue
        state = FAILED
        error = f"bug: {type(exc).__name__}: {exc}\n{traceback.format_exc()}"
    finally:
        ctx.lease.release()
    took = time.perf_counter() - start
    job_pace.note_job(ctx, took)
    values = result_values(outcome, ctx.facts, took)
    values["error"] = error
    return Ran(claimed, state, values, error, failure, took)
