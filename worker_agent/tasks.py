"""The farm's Celery tasks. Thin: they pass ids to plain functions tested on their own.

A worker agent's consumer process configures `app` for its broker and installs the device
context (`worker_agent.consumer`) before the worker starts.

After each job the task fills its device's queue from the database (by priority, fair
share and quotas), so that jobs flow without a reconciler pass.

A job that cannot reach the database is neither done nor failed: its message is put back
on the queue (after a pause, so an outage is not a busy loop) and runs when the database
answers again, without waiting for the reconciler.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from farm_core.celery_app import TASK_RUN_JOB, make_app
from farm_core.settings import default_broker_url

if TYPE_CHECKING:
    from worker_agent.consumer import ConsumerContext

app = make_app(default_broker_url())
log = logging.getLogger(__name__)
#: Pause before a job that met a database outage goes back on its queue.
DB_OUTAGE_PAUSE_S = 2.0


@app.task(name=TASK_RUN_JOB)
def run_job(job_id: int, attempt: int) -> str:
    """Run dispatch `attempt` of job `job_id` on this consumer's device."""
    from celery.exceptions import Reject

    from farm_core.database import unreachable
    from worker_agent.consumer import current_context
    from worker_agent.executor import execute_job

    ctx = current_context()
    try:
        outcome = execute_job(ctx, job_id, attempt)
    except Exception as exc:
        if not unreachable(exc):
            raise
        log.warning(
            "job %s attempt %s: database unreachable (%s); back on the queue in %g s",
            job_id,
            attempt,
            str(exc).splitlines()[0],
            DB_OUTAGE_PAUSE_S,
        )
        time.sleep(DB_OUTAGE_PAUSE_S)
        raise Reject(str(exc).splitlines()[0], requeue=True) from exc
    refill(ctx)
    return outcome


def refill(ctx: ConsumerContext) -> None:
    """Send this device its next queued jobs (farm_core.device_queue) once half its queue
    has run since the last fill: the queue never runs dry without a reconciler pass, and a
    fill (a farm-wide lock and counts) is paid once per several jobs, not per job (per job,
    the spine's throughput halved: bench/bench_spine.py). A failure is logged: the
    reconciler fills it later."""
    from farm_core.device_queue import fill, queue_depth

    if ctx.quarantined:
        return
    every = max(1, queue_depth() // 2)
    ctx.jobs_since_fill += 1
    if ctx.jobs_since_fill < every:
        return
    try:
        sent = fill(ctx.engine, ctx.dispatcher, [ctx.device.key]).sent
    except Exception as exc:  # noqa: BLE001 - the job is done; never fail it for this
        log.warning("%s: could not fill its queue (%s)", ctx.device.key, str(exc)[:200])
        return
    # a fill that found nothing to send tries again after the next job (jobs may become
    # sendable meanwhile: a quota freed, a reservation ended); one that sent waits
    ctx.jobs_since_fill = 0 if sent else every - 1
