"""A device's short jobs in batches: when its worker asks for them, and how it runs one.

When: after `FAST_STREAK` jobs in a row each ran under 50 ms (worker_agent.job_pace: the
spine's own cost per job, about 5 ms, would be a tenth of the job or more), the worker's
refill asks for up to `batch_jobs()` of the device's next dispatches per message; one
longer job and it asks for one per message again. A lab's measuring jobs (seconds) never batch; no-op
devices and the like do, where the spine's cost per job is the whole cost.

How (`execute_batch`): the message's dispatches are claimed in one statement and their
leases kept together (farm_core.job_batches, worker_agent.lease); each runs as a job of
its own message would (`executor.run_claimed`); the results of jobs that end close
together are written in one statement, at the latest when a job took 50 ms or more,
`FLUSH_AFTER_S` after the oldest unwritten one, or at the batch's end. A time limit ends
the batch: its dispatches not yet run are given back (queued again, no failure
counted) for the device's next fill; on a quarantined device each is moved as any
quarantined job is.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from delegate_runtime.env_numbers import whole_number
from farm_core import job_batches
from farm_core.device_queue import queue_depth

from .executor import STALE, Ran, after_finish, run_claimed
from .job_pace import short_below_s

if TYPE_CHECKING:
    from .consumer import ConsumerContext

log = logging.getLogger(__name__)

#: Dispatches per message for a device whose jobs are short (1: never batch).
ENV_BATCH_JOBS = "DEVICEFARM_BATCH_JOBS"
#: Short jobs in a row before a device's worker asks for batches.
FAST_STREAK = 2
#: Results wait at most this long to be written with others (s).
FLUSH_AFTER_S = 0.2


def batch_jobs() -> int:
    """Most dispatches in one message: $DEVICEFARM_BATCH_JOBS, else the queue's depth (a
    device's whole share of its queue in one message)."""
    return whole_number(ENV_BATCH_JOBS, queue_depth(), 1, 10_000)


def per_message(ctx: ConsumerContext) -> int:
    """Dispatches the device's next messages may carry."""
    return batch_jobs() if ctx.short_jobs >= FAST_STREAK else 1


def execute_batch(ctx: ConsumerContext, dispatches: list[tuple[int, int]]) -> list[str]:
    """Run a message's dispatches (job, attempt) in order; their outcomes (for the log)."""
    claimed = ctx.statements.run(
        lambda c: job_batches.claim_many(c, dispatches, ctx.worker, ctx.timing.lease_s)
    )
    outcome = {d: STALE for d in dispatches}
    pending: list[Ran] = []
    first_pending = 0.0
    ctx.lease.hold_waiting([(c.job_id, c.attempt) for c in claimed])
    try:
        for i, job in enumerate(claimed):
            key = (job.job_id, job.attempt)
            if ctx.lease.gone(key):
                continue  # cancelled or moved while it waited
            ran = run_claimed(ctx, job)
            if isinstance(ran, str):
                outcome[key] = ran
                continue
            ctx.after_job()  # its canary first, as after a job of its own message
            if not pending:
                first_pending = time.monotonic()
            pending.append(ran)
            last = i == len(claimed) - 1
            ended_early = _time_limited(ran)
            if (
                last
                or ended_early
                or ran.took_s >= short_below_s()
                or time.monotonic() - first_pending >= FLUSH_AFTER_S
            ):
                outcome.update(_flush(ctx, pending))
                pending = []
            if ended_early and not last:
                _give_back(ctx, claimed[i + 1 :], "the batch's message reached its time limit")
                break
    finally:
        ctx.lease.release_waiting()
    return [outcome[d] for d in dispatches]


def _flush(ctx: ConsumerContext, ran: list[Ran]) -> dict[tuple[int, int], str]:
    finishes = [
        job_batches.Finish(r.claimed.job_id, r.claimed.attempt, r.state, r.values) for r in ran
    ]
    written = ctx.statements.run(lambda c: job_batches.finish_many(c, finishes, ctx.worker))
    out = {}
    for r in ran:
        key = (r.claimed.job_id, r.claimed.attempt)
        out[key] = after_finish(ctx, r, key in written)
    return out


def _time_limited(ran: Ran) -> bool:
    from celery.exceptions import SoftTimeLimitExceeded

    return isinstance(ran.failure, SoftTimeLimitExceeded)


def _give_back(ctx: ConsumerContext, rest: list, why: str) -> None:
    dispatches = [(c.job_id, c.attempt) for c in rest]
    with ctx.engine.begin() as conn:
        ids = job_batches.release_many(conn, dispatches, ctx.worker, ctx.device.key, why)
    if ids:
        log.warning("%s: jobs %s given back: %s", ctx.device.key, ids, why)
