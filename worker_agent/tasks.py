"""The farm's Celery tasks. Thin: they pass ids to plain functions tested on their own.

A worker agent's consumer process configures `app` for its broker and installs the device
context (`worker_agent.consumer`) before the worker starts; a device group (worker_agent.group)
runs the same body, `run_dispatches`, on a thread per message with each device's own context.

After each job the task fills its device's queue from the database (by priority, fair
share and quotas), so that jobs flow without a reconciler pass.

A device whose jobs are short gets several per message (`run_jobs`, worker_agent.batches).

A job that cannot reach the database is neither done nor failed: its message is put back
on the queue (after a pause, so an outage is not a busy loop) and runs when the database
answers again, without waiting for the reconciler.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from farm_core.celery_app import TASK_RUN_JOB, TASK_RUN_JOBS, make_app
from farm_core.settings import default_broker_url
from worker_agent.celery_message import parse_dispatches

if TYPE_CHECKING:
    from worker_agent.consumer import ConsumerContext

app = make_app(default_broker_url())
log = logging.getLogger(__name__)
#: Pause before a job that met a database outage goes back on its queue.
DB_OUTAGE_PAUSE_S = 2.0


class DatabaseUnreachable(Exception):
    """A job met a database outage: neither done nor failed, its message goes back."""


@app.task(name=TASK_RUN_JOB)
def run_job(job_id: int, attempt: int) -> str:
    """Run dispatch `attempt` of job `job_id` on this consumer's device."""
    return _run_task([(job_id, attempt)])


@app.task(name=TASK_RUN_JOBS)
def run_jobs(dispatches: list[list[int]]) -> str:
    """Run several dispatches ([job_id, attempt] each) of this consumer's device in order."""
    return _run_task(parse_dispatches(dispatches))


def _run_task(dispatches: list[tuple[int, int]]) -> str:
    from celery.exceptions import Reject

    from worker_agent.consumer import current_context

    try:
        return run_dispatches(current_context(), dispatches)
    except DatabaseUnreachable as exc:
        raise Reject(str(exc), requeue=True) from exc


def run_dispatches(ctx: ConsumerContext, dispatches: list[tuple[int, int]]) -> str:
    """The task's body on `ctx`'s device (a consumer's task, a device group's thread): run
    the message's jobs, then fill the device's queue; DatabaseUnreachable, after a pause,
    when the database did not answer (the caller puts the message back)."""
    from farm_core.database import unreachable
    from worker_agent.batches import execute_batch
    from worker_agent.executor import execute_job

    ctx.others_out = None  # counted by this job's finish, if it gets that far
    try:
        if len(dispatches) == 1:
            outcome = execute_job(ctx, *dispatches[0])
        else:
            outcome = ", ".join(execute_batch(ctx, dispatches))
    except Exception as exc:
        if not unreachable(exc):
            raise
        log.warning(
            "jobs %s: database unreachable (%s); back on the queue in %g s",
            ", ".join(f"{j} attempt {a}" for j, a in dispatches),
            str(exc).splitlines()[0],
            DB_OUTAGE_PAUSE_S,
        )
        time.sleep(DB_OUTAGE_PAUSE_S)
        raise DatabaseUnreachable(str(exc).splitlines()[0]) from exc
    refill(ctx, len(dispatches))
    return outcome


def refill(ctx: ConsumerContext, jobs_ended: int = 1) -> None:
    """Send this device its next queued jobs (farm_core.device_queue) when its queue is down
    to its last job (the fill says how many it holds): the device never waits for a
    message, since the fill runs between two jobs with one still queued, and a fill is paid
    once per `queue_depth() - 1` jobs, not per job (per job, the spine's throughput
    halved: bench/bench_spine.py). Fair shares hold as well as with a fill after every job:
    a project that comes later still waits behind at most a queue's depth of others' jobs
    per device (those queued when it came, then its jobs go first). A fill that fails or
    finds nothing to send tries again after the next job (jobs may become sendable
    meanwhile: a quota freed, a reservation ended); the reconciler fills it too. Between
    fills the database says whether the queue is down to its last job all the same (one
    count): a count kept here alone drifts (a message that ran no job, a pool child
    replaced), and a device whose queue ran dry before its count did would wait for the
    reconciler. On PostgreSQL that count came with the job's finish (`others_out`, no
    round trip of its own).

    The fill runs on the device's own connection (`statements`). A device whose queue is
    empty after the fill (or that is quarantined) gives back its database connection: an
    idle device holds none (farm_core.db_pool)."""
    from farm_core.device_queue import fill, jobs_out
    from worker_agent.batches import per_message

    key = ctx.device.key
    others, ctx.others_out = ctx.others_out, None
    if ctx.quarantined:
        ctx.release_connection()
        return
    ctx.jobs_to_fill -= jobs_ended
    if ctx.jobs_to_fill > 0:
        if others is None:
            others = ctx.statements.run(lambda c: jobs_out(c, key))
        if others > 1:
            return
    ctx.jobs_to_fill = 1
    try:
        filled = fill(
            ctx.engine,
            ctx.dispatcher,
            [key],
            statements=ctx.statements,
            per_message=per_message(ctx),
        )
    except Exception as exc:  # noqa: BLE001 - the job is done; never fail it for this
        log.warning("%s: could not fill its queue (%s)", key, str(exc)[:200])
        return
    if filled.sent:
        ctx.jobs_to_fill = max(1, filled.holding.get(key, 0) - 1)
    elif not filled.holding.get(key):
        ctx.release_connection()
