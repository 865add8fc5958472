"""Several dispatches of one device in one message, claimed, renewed and finished in sets.

Per job the farm's spine paid a Celery task, a claim, a finish and a share of the queue's
fill: on two cores about 4.7 ms of the machine's CPU for a no-op job against plain
Celery's 1.8 (bench/bench_spine.py; docs/benchmarks.md works out why a statement per job
per state change cannot reach issue 44's 0.8). Where a device's jobs are short, its worker
asks its fill for messages that carry several of its next dispatches
(`devicefarm.run_jobs`, farm_core.dispatch.messages), claims them in one statement when
the message starts, keeps their leases in one, and writes the results of those that end
close together in one (`finish_many`).

Claimed together means running together as far as the farm can tell: every dispatch of a
batch holds a lease from its start, a cancel or move of one is found at the next renewal,
and a worker lost mid-batch leaves all of them to the reconciler, each counted as a failure
of its lease. So batches are only for short jobs (worker_agent.batches decides), where a
batch is over in a blink, and the jobs a lab measures for seconds go one per message as
before.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, bindparam, text, tuple_, update
from sqlalchemy.dialects import postgresql

from . import free_claim, jobs
from .schema import DISPATCHED, QUEUED, RUNNING, Job, Result, utcnow

JOBS = Job.__table__
#: Outcome of a batch's dispatch given back unrun (a time limit or quarantine ended it).
RELEASED = "released"


@dataclass(frozen=True)
class Finish:
    """One dispatch's end, as `jobs.finish` takes it."""

    job_id: int
    attempt: int
    state: str
    result: dict[str, Any]


def claim_many(
    conn: Connection,
    dispatches: Sequence[tuple[int, int]],
    worker: str,
    lease_s: float,
    now: datetime | None = None,
) -> list[jobs.Claimed]:
    """Claim `dispatches` (job, attempt) for `worker`: those nothing holds in one statement
    (free_claim's compare-and-set for a set), every other one by `jobs.claim`'s plain path
    (a hold, a redelivery, a stale message); the claimed in the order given."""
    now = now or utcnow()
    lease = now + timedelta(seconds=lease_s)
    wanted = [(int(j), int(a)) for j, a in dispatches]
    rows = conn.execute(
        update(JOBS)
        .where(
            *_dispatches_in(conn, wanted),
            JOBS.c.state.in_((QUEUED, DISPATCHED)),
            ~free_claim.RESERVED_NOW,
            ~free_claim.LIMITED,
        )
        .values(**free_claim.CLAIM_VALUES)
        .returning(*free_claim.CLAIMED, free_claim.DEVICE_HEALTH.label("device_health")),
        {"w": worker, "lease": lease, "now": now},
    ).all()
    claimed = {(r[0], r[1]): jobs.Claimed(*r) for r in rows}
    for job_id, attempt in wanted:
        if (job_id, attempt) not in claimed:
            plain = jobs.claim(conn, job_id, attempt, worker, lease_s, now, fast=False)
            if plain is not None:
                claimed[(job_id, attempt)] = plain
    return [claimed[d] for d in wanted if d in claimed]


def renew_many(
    conn: Connection,
    dispatches: Sequence[tuple[int, int]],
    worker: str,
    lease_s: float,
    now: datetime | None = None,
) -> set[tuple[int, int]]:
    """Extend the leases of `dispatches` still running for `worker`; those it still holds."""
    if not dispatches:
        return set()
    now = now or utcnow()
    rows = conn.execute(
        update(JOBS)
        .where(
            *_dispatches_in(conn, [(int(j), int(a)) for j, a in dispatches]),
            JOBS.c.state == RUNNING,
            JOBS.c.worker == worker,
        )
        .values(lease_expires_at=now + timedelta(seconds=lease_s))
        .returning(JOBS.c.id, JOBS.c.attempt)
    )
    return {(r[0], r[1]) for r in rows}


def finish_many(
    conn: Connection,
    finishes: Sequence[Finish],
    worker: str,
    now: datetime | None = None,
) -> set[tuple[int, int]]:
    """End `finishes` as `jobs.finish` ends each, once each; the (job, attempt) written (a
    dispatch no longer this worker's is not). On PostgreSQL one statement (the rows as one
    JSON parameter: the jobs' UPDATE feeds the results' INSERT), safe under autocommit;
    elsewhere a `jobs.finish` each, in the caller's transaction."""
    if not finishes:
        return set()
    now = now or utcnow()
    if conn.dialect.name != "postgresql":
        return {
            (f.job_id, f.attempt)
            for f in finishes
            if jobs.finish(conn, f.job_id, f.attempt, worker, f.state, f.result, now)
        }
    rows = [
        _json_row(jobs.result_row(f.job_id, f.attempt, worker, f.state, f.result, now))
        for f in finishes
    ]
    done = conn.execute(
        _FINISH_MANY, {"rows": json.dumps(rows), "w": worker, "now": now, "running": RUNNING}
    )
    return {(r[0], r[1]) for r in done}


def release_many(
    conn: Connection,
    dispatches: Sequence[tuple[int, int]],
    worker: str,
    device_key: str,
    why: str,
    now: datetime | None = None,
) -> list[int]:
    """Give back claimed dispatches that will not run here now (the batch's message ended
    early): queued again as their next attempt, no failure counted, the attempt noted;
    the device's next fill sends them. The ids given back."""
    held = {(int(j), int(a)): (device_key, worker) for j, a in dispatches}
    return jobs.back_to_queue(
        conn,
        held,
        RUNNING,
        RELEASED,
        lambda _attempt: why,
        now or utcnow(),
        where=(JOBS.c.worker == worker,),
    )


def _dispatches_in(conn: Connection, pairs: list[tuple[int, int]]) -> tuple[Any, ...]:
    """A job row among `pairs` (id, attempt): found by its id (the primary key: a pair's
    `IN` alone made PostgreSQL scan the table, jobs.cas_many), then its attempt checked."""
    return (jobs.ids_in(conn, [j for j, _ in pairs]), tuple_(JOBS.c.id, JOBS.c.attempt).in_(pairs))


# -- the finish of many on PostgreSQL ------------------------------------------------------

_RESULTS = Result.__table__
#: Result columns taken from the finished job's row; the rest come with each finish.
_FROM_JOB = ("campaign_id", "model_sha256", "device_key", "config")
_GIVEN = tuple(c.name for c in _RESULTS.c if c.name not in ("id", "created_at", *_FROM_JOB))
_PG = postgresql.dialect()


def _record_type(name: str) -> str:
    return f"{name} {_RESULTS.c[name].type.compile(dialect=_PG)}"


_FINISH_MANY = text(
    "WITH v AS (SELECT * FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS v("
    + ", ".join(_record_type(c) for c in _GIVEN)
    + ")), done AS (UPDATE jobs SET state = v.outcome, finished_at = :now,"
    " updated_at = :now, lease_expires_at = NULL, reason = v.error FROM v"
    " WHERE jobs.id = v.job_id AND jobs.attempt = v.attempt AND jobs.state = :running"
    " AND jobs.worker = :w RETURNING jobs.id, jobs.attempt, "
    + ", ".join(f"jobs.{c}" for c in _FROM_JOB)
    + ") INSERT INTO results (created_at, "
    + ", ".join((*_FROM_JOB, *_GIVEN))
    + ") SELECT :now, "
    + ", ".join((*(f"done.{c}" for c in _FROM_JOB), *(f"v.{c}" for c in _GIVEN)))
    + " FROM done JOIN v ON v.job_id = done.id AND v.attempt = done.attempt"
    " RETURNING results.job_id, results.attempt"
).bindparams(bindparam("now", type_=JOBS.c.finished_at.type))


def _json_row(row: dict[str, Any]) -> dict[str, Any]:
    """`row`'s given columns as JSON values (a number that is not finite as PostgreSQL's
    own spelling, which its float input reads)."""
    return {c: _json_scalar(row.get(c)) for c in _GIVEN}


def _json_scalar(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value
