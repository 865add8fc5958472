"""Job state transitions. Every change is a compare-and-set on (state, attempt), so the
worker, the reconciler and `cancel` can race without a lost or doubled update.

    queued ──send──▶ dispatched ──claim──▶ running ──finish──▶ succeeded | failed | timed_out
       ▲                 │                   │
       └─────place───────┴──── move ─────────┘        (any active state) ──▶ cancelled

A `queued` job has no message out: `place` picks a device, bumps the attempt and returns a
SendOrder; the caller sends it after commit, then `mark_sent` makes the job `dispatched`.
Bumping the attempt makes any older message for the job stale: only the current attempt
can claim, and only the claimer of the current attempt can finish, so a redelivered message
never runs twice nor writes a second result.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ARRAY,
    Connection,
    Integer,
    Text,
    and_,
    any_,
    bindparam,
    case,
    cast,
    func,
    insert,
    literal,
    literal_column,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB

from . import free_claim, holds, metrics, reservations
from .configs import supports
from .dispatch import SendOrder
from .pair_chunks import PAIRS_PER_STATEMENT, chunks
from .schema import (
    ACTIVE_STATES,
    CANCELLED,
    DISPATCHED,
    FAILED,
    QUARANTINED,
    QUEUED,
    RUNNING,
    TIMED_OUT,
    Attempt,
    Campaign,
    Device,
    Job,
    Result,
    utcnow,
)
from .selectors import parse_selector
from .settings import BACKOFF_BASE_S, BACKOFF_MAX_S, MAX_FAILURES, Timing
from .text_safety import storable, storable_text

WAITING = "waiting for a matching device"
#: Job ids per `id IN (...)` statement (SQLite allows 32,766 parameters).
IDS_PER_STATEMENT = 5000
#: The most characters of a progress line stored (a runner's stage name is free text).
PROGRESS_CHARS = 200
#: Core tables: statements on them skip the ORM's per-statement value coercion (hot path).
JOBS = Job.__table__
_CLAIM = (
    update(JOBS)
    .where(*free_claim.CLAIMABLE)
    .values(**free_claim.CLAIM_VALUES)
    .returning(*free_claim.CLAIMED)
)
_FINISH = (
    update(JOBS)
    .where(
        JOBS.c.id == bindparam("jid"),
        JOBS.c.attempt == bindparam("att"),
        JOBS.c.state == RUNNING,
        JOBS.c.worker == bindparam("w"),
    )
    .values(
        state=bindparam("st"),
        finished_at=bindparam("now"),
        updated_at=bindparam("now"),
        lease_expires_at=None,
        reason=bindparam("why"),
    )
    .returning(JOBS.c.campaign_id, JOBS.c.model_sha256, JOBS.c.device_key, JOBS.c.config)
)
_RESULT_COLUMNS = tuple(c.name for c in Result.__table__.c if c.name != "id")
#: Result columns copied from the job row; the rest come from the runner's outcome.
_JOB_COPIED = ("campaign_id", "model_sha256", "device_key", "config")
_RESULT_OWN_COLUMNS = tuple(c for c in _RESULT_COLUMNS if c not in _JOB_COPIED)
_RESULT_DEFAULTS: dict[str, Any] = {
    "error": "",
    "log": "",
    "worker": "",
    "config_fingerprint": "",
} | {k: {} for k in ("benchmark", "diff", "delegation", "device_facts", "versions", "measurement")}
_INSERT_RESULT = insert(Result.__table__)
_FINISHED = _FINISH.cte("finished")
_FINISH_AND_INSERT = insert(Result.__table__).from_select(
    [*_JOB_COPIED, *_RESULT_OWN_COLUMNS],
    select(
        *(_FINISHED.c[k] for k in _JOB_COPIED),
        *(bindparam(f"r_{k}", type_=Result.__table__.c[k].type) for k in _RESULT_OWN_COLUMNS),
    ),
)
#: The device's other jobs out (dispatched or running) as the finish found them: the
#: worker's refill reads it instead of counting again (worker_agent.tasks.refill).
_OTHERS_OUT = (
    select(func.count())
    .select_from(JOBS)
    .where(
        # the inserted result's column (written out: SQLAlchemy does not correlate RETURNING)
        JOBS.c.device_key == literal_column(f"{Result.__tablename__}.device_key"),
        JOBS.c.state.in_((DISPATCHED, RUNNING)),
        JOBS.c.id != bindparam("jid"),
    )
    .scalar_subquery()
)
_FINISH_INSERT_COUNT = _FINISH_AND_INSERT.returning(_OTHERS_OUT)


@dataclass(frozen=True)
class Claimed:
    """A job this worker now runs."""

    job_id: int
    attempt: int
    campaign_id: int
    model_sha256: str
    config: str
    device_key: str
    #: its device's health as read with the claim (None: not read; '' none recorded)
    device_health: str | None = None


def backoff_s(failures: int) -> float:
    """Delay before retry number `failures` (exponential, capped)."""
    return min(BACKOFF_BASE_S * 2 ** max(failures - 1, 0), BACKOFF_MAX_S)


def record_attempt(
    conn: Connection,
    job_id: int,
    attempt: int,
    device_key: str,
    worker: str,
    outcome: str,
    reason: str,
    now: datetime,
) -> None:
    """Note what happened to one dispatch (kept for failures, moves and lost messages)."""
    entry = {
        "job_id": job_id,
        "attempt": attempt,
        "device_key": device_key,
        "worker": worker,
        "outcome": outcome,
        "reason": reason,
    }
    record_attempts(conn, [entry], now)


def record_attempts(conn: Connection, entries: Sequence[dict[str, Any]], now: datetime) -> None:
    """Note what happened to many dispatches (keys: job_id, attempt, device_key, worker,
    outcome, reason; a reason may quote a device's output), none noted twice: on
    PostgreSQL one INSERT from arrays that skips a (job, attempt) already noted (the
    attempts' unique key); elsewhere one read of those already noted, one INSERT of the
    rest. (A lost host's 800 attempts: the read and a row-by-row INSERT took 25 ms of the
    reconciler's CPU on a quiet machine, 244 under a 1,000-device fleet's load.)"""
    if not entries:
        return
    if conn.dialect.name == "postgresql":
        _record_attempts_from_arrays(conn, entries, now)
        return
    known: set[tuple[int, int]] = set()
    for part in chunks(sorted({e["job_id"] for e in entries})):
        rows = conn.execute(select(Attempt.job_id, Attempt.attempt).where(Attempt.job_id.in_(part)))
        known.update((job_id, attempt) for job_id, attempt in rows)
    clean = functools.cache(storable_text)  # many share a reason (a lost device's jobs)
    new = [
        {**e, "reason": clean(e["reason"]), "at": now}
        for e in entries
        if (e["job_id"], e["attempt"]) not in known
    ]
    if new:
        conn.execute(insert(Attempt.__table__), new)


_ATTEMPTS_FROM_ARRAYS = text(
    "INSERT INTO attempts (job_id, attempt, device_key, worker, outcome, reason, at)"
    " SELECT e.job_id, e.attempt, e.device_key, e.worker, e.outcome, r.reasons[e.reason], :at"
    " FROM unnest(CAST(:job_ids AS integer[]), CAST(:attempts AS integer[]),"
    " CAST(:devices AS text[]), CAST(:workers AS text[]), CAST(:outcomes AS text[]),"
    " CAST(:reason_of AS integer[]))"
    " AS e(job_id, attempt, device_key, worker, outcome, reason),"
    " (SELECT CAST(:reasons AS text[]) AS reasons) AS r"
    " ON CONFLICT ON CONSTRAINT uq_attempts_job_attempt DO NOTHING"
)


def _record_attempts_from_arrays(
    conn: Connection, entries: Sequence[dict[str, Any]], now: datetime
) -> None:
    """record_attempts on PostgreSQL: a column of arrays a field, each distinct reason sent
    once (a lost device's jobs share theirs) and named by its place."""
    clean = functools.cache(storable_text)
    reasons: dict[str, int] = {}  #: reason -> its place in the array (from 1)
    reason_of = [reasons.setdefault(clean(e["reason"]), len(reasons) + 1) for e in entries]
    conn.execute(
        _ATTEMPTS_FROM_ARRAYS,
        {
            "at": now,
            "job_ids": [e["job_id"] for e in entries],
            "attempts": [e["attempt"] for e in entries],
            "devices": [e["device_key"] for e in entries],
            "workers": [e["worker"] for e in entries],
            "outcomes": [e["outcome"] for e in entries],
            "reason_of": reason_of,
            "reasons": list(reasons),
        },
    )


# -- worker side ------------------------------------------------------------------------


def claim(
    conn: Connection,
    job_id: int,
    attempt: int,
    worker: str,
    lease_s: float,
    now: datetime | None = None,
    fast: bool = True,
) -> Claimed | None:
    """Start dispatch `attempt` of a job on `worker`; None when the message is stale.

    `fast`: first try the one-statement claim of a job nothing holds (farm_core.free_claim,
    which also reads the device's health); the plain path below decides every other case.

    A job that may not start now (its device reserved by someone else, its project at a
    quota: farm_core.holds) goes back to queued as a new attempt, with the reason.
    A running job is claimed again by its own worker (the execution before died: a device
    runs one job at a time, so a redelivery to the same consumer means the last one is
    gone) or by anyone once its lease has expired. That counts as an infrastructure failure.
    Every write here is a single compare-and-set statement, so autocommit is safe.
    """
    now = now or utcnow()
    lease = now + timedelta(seconds=lease_s)
    params = {"jid": job_id, "att": attempt, "w": worker, "lease": lease, "now": now}
    if fast and (free := conn.execute(free_claim.CLAIM_FREE, params).first()) is not None:
        return Claimed(*free)
    cols = (Job.id, Job.attempt, Job.campaign_id, Job.model_sha256, Job.config, Job.device_key)
    with holds.before_start(conn, job_id, now) as why:
        if why and _hold(conn, job_id, attempt, why, now):
            return None  # back to queued: sent again when its project or device allows
        fresh = conn.execute(_CLAIM, params).first()
    if fresh is not None:
        return Claimed(*fresh)
    row = conn.execute(
        select(Job.state, Job.worker, Job.lease_expires_at, Job.failures, Job.device_key).where(
            Job.id == job_id, Job.attempt == attempt
        )
    ).first()
    if row is None or row.state != RUNNING:
        return None
    lease_gone = row.lease_expires_at is None or row.lease_expires_at < now
    if row.worker != worker and not lease_gone:
        return None
    failures = row.failures + 1
    reason = f"worker {row.worker} was lost while running attempt {attempt}"
    if failures >= MAX_FAILURES:
        _cas(
            conn,
            job_id,
            RUNNING,
            attempt,
            state=FAILED,
            failures=failures,
            finished_at=now,
            lease_expires_at=None,
            reason=f"{reason}; gave up after {failures} failures",
            updated_at=now,
            extra=(Job.worker == row.worker,),
        )
        return None
    again = conn.execute(
        update(JOBS)
        .where(
            Job.id == job_id, Job.attempt == attempt, Job.state == RUNNING, Job.worker == row.worker
        )
        .values(
            worker=worker,
            lease_expires_at=lease,
            started_at=now,
            failures=failures,
            reason=f"restarted: {reason}",
            updated_at=now,
            progress="",
        )
        .returning(*cols)
    ).first()
    return Claimed(*again) if again is not None else None


def renew_lease(
    conn: Connection,
    job_id: int,
    attempt: int,
    worker: str,
    lease_s: float,
    now: datetime | None = None,
    progress: str | None = None,
) -> bool:
    """Extend a running job's lease, and store its newest `progress` line when given;
    False when the job is no longer this worker's."""
    now = now or utcnow()
    values: dict[str, Any] = {"lease_expires_at": now + timedelta(seconds=lease_s)}
    if progress is not None:
        values["progress"] = storable_text(progress)[:PROGRESS_CHARS]
    res = conn.execute(
        update(JOBS)
        .where(Job.id == job_id, Job.attempt == attempt, Job.state == RUNNING, Job.worker == worker)
        .values(**values)
    )
    return res.rowcount == 1


def finish(
    conn: Connection,
    job_id: int,
    attempt: int,
    worker: str,
    state: str,
    result: dict[str, Any],
    now: datetime | None = None,
) -> bool:
    """End a running job in `state` and store its result, once; False if it was not ours.

    One statement on PostgreSQL (safe under autocommit); a transaction is needed elsewhere.
    """
    return finish_counting(conn, job_id, attempt, worker, state, result, now)[0]


def finish_counting(
    conn: Connection,
    job_id: int,
    attempt: int,
    worker: str,
    state: str,
    result: dict[str, Any],
    now: datetime | None = None,
) -> tuple[bool, int | None]:
    """`finish`, and how many other jobs the job's device holds (dispatched or running) as
    the finish found them; None where not counted (not written, or not PostgreSQL, where
    the caller counts on its own). On PostgreSQL the count is part of the finish's one
    statement (the worker's refill needs it after every job: a round trip saved)."""
    now = now or utcnow()
    row = result_row(job_id, attempt, worker, state, result, now)
    params = {
        "jid": job_id,
        "att": attempt,
        "w": worker,
        "st": state,
        "now": now,
        "why": row["error"],
    }
    if conn.dialect.name == "postgresql":  # one round trip: UPDATE ... RETURNING feeds INSERT
        params.update({f"r_{k}": row.get(k) for k in _RESULT_OWN_COLUMNS})
        others = conn.execute(_FINISH_INSERT_COUNT, params).scalar()
        return (others is not None, others)
    job = conn.execute(_FINISH, params).first()
    if job is None:
        return False, None
    row.update(zip(_JOB_COPIED, job, strict=True))
    conn.execute(_INSERT_RESULT, {k: row.get(k) for k in _RESULT_COLUMNS})
    return True, None


def result_row(
    job_id: int, attempt: int, worker: str, state: str, result: dict[str, Any], now: datetime
) -> dict[str, Any]:
    """The results row a finish writes, but for the columns copied from the job's row."""
    row = dict(_RESULT_DEFAULTS)
    row.update(storable(result))  # a tool's output: NUL and bytes that are not UTF-8 escaped
    for column, figure in metrics.STORED_FIGURES.items():  # derived from the record
        if row.get(column) is None:
            row[column] = figure(row.get("benchmark") or {})
    row.update(job_id=job_id, attempt=attempt, outcome=state, worker=worker, created_at=now)
    return row


# -- placement ----------------------------------------------------------------------------


#: Device columns that say what hardware a job measures: a retry or move keeps them.
HARDWARE = ("kind", "vendor", "renderer")


def eligible_devices(
    conn: Connection,
    selector_text: str,
    config: str,
    timing: Timing,
    now: datetime,
    like: str | None = None,
) -> list[str]:
    """Keys of online (state and heartbeat), unquarantined devices that match a selector and
    run `config`; with
    `like`, only those of the same hardware (`HARDWARE` columns) as that device."""
    selector, _ = parse_selector(selector_text)
    if selector is None:
        return []
    where = live_device(timing, now)
    if like is not None:
        cols = [getattr(Device, c) for c in HARDWARE]
        same = conn.execute(select(*cols).where(Device.key == like)).first()
        if same is None:
            return []
        where += [c == v for c, v in zip(cols, same, strict=True)]
    rows = conn.execute(select(Device.__table__).where(*where)).mappings()
    return sorted(r["key"] for r in rows if takes(r, selector, config))


def live_device(timing: Timing, now: datetime) -> list[Any]:
    """Conditions on `Device` of a device that may take jobs: online (state and a heartbeat
    within `offline_after_s`) and not quarantined."""
    return [
        Device.state == "online",
        Device.last_seen >= now - timedelta(seconds=timing.offline_after_s),
        Device.health != QUARANTINED,
    ]


def takes(device: Any, selector: Any, config: str) -> bool:
    """Whether `device` (a row's mapping) runs `config` and `selector` (parsed) matches it."""
    return supports(device["kind"], config)[0] and selector.matches(device)


def _load(conn: Connection, device_keys: Iterable[str]) -> dict[str, int]:
    keys = list(device_keys)
    if not keys:
        return {}
    rows = conn.execute(
        select(Job.device_key, func.count())
        .where(Job.state.in_(ACTIVE_STATES), Job.device_key.in_(keys))
        .group_by(Job.device_key)
    )
    return {k: n for k, n in rows}


def choose_device(
    conn: Connection,
    candidates: Sequence[str],
    current: str,
    avoid: set[str],
    prefer_other: bool,
) -> str | None:
    """The candidate to send a job to: untried devices first, then the least loaded."""
    if not candidates:
        return None
    load = _load(conn, candidates)

    def rank(key: str) -> tuple[int, int, int, str]:
        other = 0 if (key != current) == prefer_other else 1
        return (1 if key in avoid else 0, other, load.get(key, 0), key)

    return min(candidates, key=rank)


def place(
    conn: Connection,
    job_id: int,
    timing: Timing,
    *,
    expect_state: str,
    expect_attempt: int,
    outcome: str,
    reason: str,
    count_failure: bool = False,
    prefer_other: bool = False,
    worker: str = "",
    now: datetime | None = None,
) -> SendOrder | None:
    """Move a job to a fresh attempt on the best eligible device and return what to send.

    None when the job changed meanwhile, gave up after too many failures (now failed), or
    no eligible device exists (now queued, waiting: the reconciler places it later and
    expires it when no device turns up).
    """
    now = now or utcnow()
    reason = storable_text(reason)  # may quote a device's output (a DeviceError's message)
    job = conn.execute(
        select(Job.__table__, Campaign.selector, Campaign.settings, Campaign.owner)
        .join(Campaign, Campaign.id == Job.campaign_id)
        .where(Job.id == job_id, Job.state == expect_state, Job.attempt == expect_attempt)
    ).first()
    if job is None:
        return None
    failures = job.failures + (1 if count_failure else 0)
    if outcome:
        record_attempt(
            conn, job_id, expect_attempt, job.device_key, worker or job.worker, outcome, reason, now
        )
    if count_failure and failures >= MAX_FAILURES:
        _cas(
            conn,
            job_id,
            expect_state,
            expect_attempt,
            state=FAILED,
            failures=failures,
            finished_at=now,
            lease_expires_at=None,
            updated_at=now,
            reason=f"{reason}; gave up after {failures} infrastructure failures",
        )
        return None
    tried = set(
        conn.execute(
            select(Attempt.device_key).where(
                Attempt.job_id == job_id,
                Attempt.outcome.in_(("device_error", "lease_expired", "worker_lost")),
            )
        ).scalars()
    )
    # a retry measures the same configuration on the same hardware as the job was planned for
    candidates = eligible_devices(
        conn, job.selector, job.config, timing, now, like=job.planned_device
    )
    reserved = {  # devices reserved for someone else now: the job goes elsewhere or waits
        k: h
        for k, h in reservations.active_on(conn, candidates, now).items()
        if not h.holds(job.project, job.owner)
    }
    free = [k for k in candidates if k not in reserved]
    pick = choose_device(conn, free, job.device_key, tried, prefer_other)
    requeued = {  # back to QUEUED as a new attempt, unleased and unclaimed
        "state": QUEUED,
        "attempt": expect_attempt + 1,
        "failures": failures,
        "worker": "",
        "lease_expires_at": None,
        "updated_at": now,
    }
    if pick is None and reserved:  # it waits for a reserved device, sent when that allows
        key = choose_device(conn, sorted(reserved), job.device_key, tried, prefer_other)
        if expect_state == QUEUED and key == job.device_key:
            return None
        why = holds.held(reserved[key].wait_reason())  # type: ignore[index]
        _cas(conn, job_id, expect_state, expect_attempt, **requeued, device_key=key, reason=why)
        return None
    if pick is None:
        if expect_state == QUEUED and job.reason.endswith(WAITING):
            return None  # still waiting: keep the time it began (updated_at)
        waiting = f"{reason}; {WAITING}" if reason else WAITING
        _cas(conn, job_id, expect_state, expect_attempt, **requeued, reason=waiting)
        return None
    ok = _cas(
        conn, job_id, expect_state, expect_attempt, **requeued, device_key=pick, reason=reason
    )
    if not ok:
        return None
    settings = job.settings or {}
    return SendOrder(
        job_id,
        expect_attempt + 1,
        pick,
        job.priority,
        countdown_s=backoff_s(failures) if count_failure else 0.0,
        soft_limit_s=settings.get("soft_limit_s"),
        hard_limit_s=settings.get("hard_limit_s"),
    )


def take_many(
    conn: Connection, picks: Sequence[tuple[int, int]], now: datetime
) -> set[tuple[int, int]]:
    """queued -> dispatched for each (job id, attempt) still queued at that attempt, before
    their messages are sent (farm_core.device_queue), so that two senders never send one
    job; a held job's reason is cleared. Returns the pairs taken."""
    values = {
        "state": DISPATCHED,
        "dispatched_at": now,
        "reason": case((JOBS.c.reason.like(f"{holds.HELD}%"), ""), else_=JOBS.c.reason),
    }
    return set(cas_many(conn, picks, QUEUED, lambda _a, _ids: values, IDS_PER_STATEMENT))


def cas_many(
    conn: Connection,
    pairs: Iterable[tuple[int, int]],
    state: str,
    values: Callable[[int, Sequence[int]], dict[str, Any]],
    per_statement: int = PAIRS_PER_STATEMENT,
    where: Sequence[Any] = (),
) -> list[tuple[int, int]]:
    """Each (job id, attempt) of `pairs` still in `state` at that attempt (and meeting
    `where`) set to `values(attempt, ids)`: one compare-and-set statement per attempt number and
    `per_statement` ids (`id IN (...)` is a lookup on the primary key, where
    `(id, attempt) IN (...)` made PostgreSQL scan the table). The pairs changed, in order."""
    by_attempt: dict[int, list[int]] = {}
    for job_id, attempt in pairs:
        by_attempt.setdefault(attempt, []).append(job_id)
    changed: list[tuple[int, int]] = []
    for attempt, ids in sorted(by_attempt.items()):
        for part in chunks(ids, per_statement):
            rows = conn.execute(
                update(JOBS)
                .where(ids_in(conn, part), JOBS.c.attempt == attempt, JOBS.c.state == state)
                .where(*where)
                .values(**values(attempt, part))
                .returning(JOBS.c.id)
            )
            changed.extend((job_id, attempt) for job_id in rows.scalars())
    return changed


def back_to_queue(
    conn: Connection,
    held: dict[tuple[int, int], tuple[str, str]],
    state: str,
    outcome: str,
    reason: Callable[[int], str],
    now: datetime,
    where: Sequence[Any] = (),
) -> list[int]:
    """Queue the jobs of `held` ((job id, attempt) -> (device key, worker) that held it)
    again as their next attempt, each still in `state` at that attempt (and meeting
    `where`); the attempt it leaves recorded as `outcome` with `reason(attempt)`. No
    failure counted: the next fill sends them. The ids moved."""
    moved = cas_many(
        conn,
        held,
        state,
        lambda attempt, _ids: {
            "state": QUEUED,
            "attempt": attempt + 1,
            "worker": "",
            "lease_expires_at": None,
            "updated_at": now,
            "reason": reason(attempt),
        },
        where=where,
    )
    record_attempts(
        conn,
        [
            {
                "job_id": job_id,
                "attempt": attempt,
                "device_key": held[(job_id, attempt)][0],
                "worker": held[(job_id, attempt)][1],
                "outcome": outcome,
                "reason": reason(attempt),
            }
            for job_id, attempt in moved
        ],
        now,
    )
    return sorted(job_id for job_id, _ in moved)


def ids_in(conn: Connection, ids: Sequence[int]) -> Any:
    """A job's id among `ids`: on PostgreSQL `id = ANY(:ids)`, one array parameter (an
    expanded `IN` of 500 ids cost SQLAlchemy more than the server's update of the rows),
    elsewhere `id IN (...)`."""
    if conn.dialect.name == "postgresql":
        return JOBS.c.id == any_(bindparam("ids_in", list(ids), type_=ARRAY(Integer)))
    return JOBS.c.id.in_(ids)


def text_by(conn: Connection, column: Any, texts: dict[Any, str], else_: Any = None) -> Any:
    """`texts[the row's column]`, `else_` where `texts` lacks it: on PostgreSQL a lookup in
    one JSON parameter, `:texts ->> column` (a CASE of 500 keys is 1,000 parameters to
    compile per statement), elsewhere that CASE."""
    if conn.dialect.name != "postgresql":
        return case(texts, value=column, else_=else_)
    by_key = literal({str(k): v for k, v in texts.items()}, JSONB)
    found = by_key.op("->>", return_type=Text)(cast(column, Text))
    return found if else_ is None else func.coalesce(found, else_)


def take_back(conn: Connection, orders: Sequence[SendOrder]) -> None:
    """dispatched -> queued for orders the broker did not take (no message is out)."""
    for o in orders:
        _cas(conn, o.job_id, DISPATCHED, o.attempt, state=QUEUED)


def _hold(conn: Connection, job_id: int, attempt: int, why: str, now: datetime) -> bool:
    """A job whose message arrived but which may not start: queued again, a new attempt."""
    res = conn.execute(
        update(JOBS)
        .where(Job.id == job_id, Job.attempt == attempt, Job.state.in_((QUEUED, DISPATCHED)))
        .values(state=QUEUED, attempt=attempt + 1, reason=storable_text(why), updated_at=now)
    )
    return res.rowcount == 1


def mark_sent(conn: Connection, orders: Sequence[SendOrder], now: datetime | None = None) -> None:
    """queued -> dispatched for each order whose attempt is still current."""
    now = now or utcnow()
    for o in orders:
        _cas(conn, o.job_id, QUEUED, o.attempt, state=DISPATCHED, dispatched_at=now)


def expire(conn: Connection, job_id: int, why: str, now: datetime | None = None) -> bool:
    """queued -> timed_out: the job waited too long for a device."""
    now = now or utcnow()
    cur = conn.execute(select(Job.attempt, Job.reason).where(Job.id == job_id)).one()
    return _cas(
        conn,
        job_id,
        QUEUED,
        cur.attempt,
        state=TIMED_OUT,
        finished_at=now,
        updated_at=now,
        reason=f"{why}: {cur.reason}",
    )


def cancel(conn: Connection, campaign_id: int | None = None, job_ids: Sequence[int] = ()) -> int:
    """Cancel the active jobs of a campaign (or the given jobs); returns how many."""
    now = utcnow()
    where = [Job.state.in_(ACTIVE_STATES)]
    if campaign_id is not None:
        conn.execute(update(Campaign).where(Campaign.id == campaign_id).values(cancelled=True))
        where.append(Job.campaign_id == campaign_id)
    if job_ids:
        where.append(Job.id.in_(list(job_ids)))
    res = conn.execute(
        update(JOBS)
        .where(and_(*where))
        .values(
            state=CANCELLED,
            finished_at=now,
            updated_at=now,
            lease_expires_at=None,
            reason="cancelled by the user",
        )
    )
    return res.rowcount


#: States a user's re-run takes a job out of: every way a job ends without success.
RERUN_STATES = (FAILED, TIMED_OUT, CANCELLED)
RERUN_REASON = "re-run by the user"


def rerun(
    conn: Connection, job_id: int, timing: Timing, now: datetime | None = None
) -> tuple[bool, SendOrder | None]:
    """A failed, timed-out or cancelled job as a new attempt of the same cell (same model,
    configuration and hardware), its infrastructure failures forgiven. Returns whether it
    was re-queued, and what to send (None: no eligible device now; it waits, queued, for
    the reconciler)."""
    now = now or utcnow()
    job = conn.execute(
        select(Job.state, Job.attempt, Job.device_key, Job.worker, Job.reason).where(
            Job.id == job_id
        )
    ).first()
    if job is None or job.state not in RERUN_STATES:
        return False, None
    if not _cas(conn, job_id, job.state, job.attempt, failures=0, finished_at=None):
        return False, None
    # the attempt that ended keeps how and why it ended
    record_attempt(
        conn, job_id, job.attempt, job.device_key, job.worker, job.state, job.reason, now
    )
    order = place(
        conn,
        job_id,
        timing,
        expect_state=job.state,
        expect_attempt=job.attempt,
        outcome="",
        reason=RERUN_REASON,
        now=now,
    )
    after = conn.execute(select(Job.attempt).where(Job.id == job_id)).scalar_one()
    return after == job.attempt + 1, order


def _cas(
    conn: Connection,
    job_id: int,
    from_state: str,
    at_attempt: int,
    extra: tuple = (),
    **values: Any,
) -> bool:
    res = conn.execute(
        update(JOBS)
        .where(Job.id == job_id, Job.state == from_state, Job.attempt == at_attempt, *extra)
        .values(**values)
    )
    return res.rowcount == 1
