"""Each device's broker queue holds at most `queue_depth()` jobs (dispatched or running);
the rest wait in the database, queued, and are sent as the device frees a place: by
priority, then fair share between projects (farm_core.fairness), never past a project's
quota nor to a device reserved for someone else (farm_core.holds).

`fill` is called by submission (the campaign's devices), by a worker after each job (its
own device) and by every reconciler pass (every live device). Fills run one at a time
(PostgreSQL: an advisory lock; SQLite: BEGIN IMMEDIATE), and a job is marked dispatched
before its message is sent, so a job is never sent twice and a quota never overshot.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Connection, Engine, case, func, select, text, update

from delegate_runtime.errors import UsageError

from . import fairness, holds, jobs, quotas, reservations
from .dispatch import Dispatcher, SendOrder
from .schema import DISPATCHED, QUEUED, RUNNING, Campaign, Job, utcnow

#: Overrides the depth of every device's queue (jobs dispatched or running at once).
ENV_QUEUE_DEPTH = "DEVICEFARM_QUEUE_DEPTH"
#: One running and a few waiting: a device never idles between jobs, and a project that
#: comes later waits behind at most this many jobs of others per device.
DEFAULT_QUEUE_DEPTH = 8
#: The advisory lock key of a fill on PostgreSQL ("dfq1").
_FILL_LOCK = 0x64667131


def queue_depth() -> int:
    """Jobs a device holds at once (dispatched or running): $DEVICEFARM_QUEUE_DEPTH, else
    DEFAULT_QUEUE_DEPTH."""
    raw = os.environ.get(ENV_QUEUE_DEPTH, "").strip()
    if not raw:
        return DEFAULT_QUEUE_DEPTH
    try:
        depth = int(raw)
    except ValueError:
        raise UsageError(f"{ENV_QUEUE_DEPTH}={raw[:40]!r} is not a whole number") from None
    if not 1 <= depth <= 10_000:
        raise UsageError(f"{ENV_QUEUE_DEPTH} must be from 1 to 10000, not {depth}")
    return depth


@dataclass
class Filled:
    """What one fill sent, and why projects' jobs were held (project -> reason)."""

    sent: list[SendOrder] = field(default_factory=list)
    broker_error: str = ""
    held: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Waiting:
    job_id: int
    attempt: int
    priority: int
    campaign_id: int
    held: bool  #: its reason says it was held (cleared when it is sent)


def fill(
    engine: Engine,
    dispatcher: Dispatcher,
    device_keys: Iterable[str],
    now: datetime | None = None,
    depth: int | None = None,
) -> Filled:
    """Send queued jobs to `device_keys` (live devices) up to each one's queue depth."""
    now = now or utcnow()
    depth = depth or queue_depth()
    keys = sorted(set(device_keys))
    out = Filled()
    if not keys:
        return out
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _FILL_LOCK})
        orders = _plan(conn, keys, depth, now, out.held)
    if not orders:
        return out
    out.sent, out.broker_error = dispatcher.send(orders)
    if len(out.sent) < len(orders):
        took = {(o.job_id, o.attempt) for o in out.sent}
        with engine.begin() as conn:
            jobs.take_back(conn, [o for o in orders if (o.job_id, o.attempt) not in took])
    return out


def _plan(
    conn: Connection, keys: list[str], depth: int, now: datetime, held: dict[str, str]
) -> list[SendOrder]:
    """Pick each device's next jobs and mark them dispatched; the orders to send."""
    busy = dict(
        conn.execute(
            select(Job.device_key, func.count())
            .where(Job.state.in_((DISPATCHED, RUNNING)), Job.device_key.in_(keys))
            .group_by(Job.device_key)
        ).all()
    )
    room = {k: depth - busy.get(k, 0) for k in keys if depth - busy.get(k, 0) > 0}
    if not room:
        return []
    was_held = case((Job.reason.like(f"{holds.HELD}%"), 1), else_=0)
    groups = conn.execute(  # (device, project, owner) with queued jobs there
        select(Job.device_key, Job.project, Campaign.owner, func.sum(was_held))
        .join(Campaign, Campaign.id == Job.campaign_id)
        .where(Job.state == QUEUED, Job.device_key.in_(list(room)))
        .group_by(Job.device_key, Job.project, Campaign.owner)
    ).all()
    if not groups:
        return []
    projects = sorted({g.project for g in groups})
    quota = quotas.load(conn, projects)
    active = quotas.active(conn)
    shares = {
        p: fairness.Share(
            active.get(p, quotas.Active()).jobs,
            active.get(p, quotas.Active()).last_sent,
            _room(quota.get(p), active.get(p, quotas.Active()).jobs),
        )
        for p in projects
    }
    daily = {
        p: quotas.minutes_reason(q, quotas.minutes_today(conn, p, now))
        for p, q in quota.items()
        if q.device_minutes_per_day is not None
    }
    reserved = reservations.active_on(conn, list(room), now)
    by_device: dict[str, dict[tuple[str, str], list[_Waiting]]] = defaultdict(dict)
    for key, project, owner, n_held in groups:
        hold = reserved.get(key)
        why = hold.wait_reason() if hold and not hold.holds(project, owner) else ""
        why = why or daily.get(project, "")
        if not why and shares[project].room == 0:
            why = quotas.concurrent_reason(quota[project], shares[project].out)
        if why:
            held[project] = why
            _note(conn, key, project, owner, holds.held(why))
            continue
        if n_held:
            _note(conn, key, project, owner, "")
        by_device[key][(project, owner)] = _next_jobs(conn, key, project, owner, room[key])
    picks: list[tuple[str, _Waiting]] = []
    for key in sorted(by_device):
        queues = by_device[key]
        group_shares = {g: shares[g[0]] for g in queues}  # a project's owners share its share
        chosen = fairness.pick(queues, lambda w: w.priority, group_shares, room[key], now)
        picks.extend((key, w) for w in chosen)
    orders = _take(conn, picks, now)
    for key, queues in by_device.items():  # projects that reached their quota meanwhile
        for project, owner in queues:
            if shares[project].room == 0:
                why = quotas.concurrent_reason(quota[project], shares[project].out)
                held[project] = why
                _note(conn, key, project, owner, holds.held(why))
    return orders


def _room(quota: quotas.Quota | None, out: int) -> int | None:
    if quota is None or quota.max_concurrent_jobs is None:
        return None
    return max(quota.max_concurrent_jobs - out, 0)


def _owned_by(owner: str):
    return Job.campaign_id.in_(select(Campaign.id).where(Campaign.owner == owner))


def _note(conn: Connection, key: str, project: str, owner: str, reason: str) -> None:
    """Set the reason of a group's queued jobs ('' clears a held one); rows that already
    say it are not written."""
    where = [Job.state == QUEUED, Job.device_key == key, Job.project == project, _owned_by(owner)]
    if reason:
        where.append(Job.reason != reason)
    else:
        where.append(Job.reason.like(f"{holds.HELD}%"))
    conn.execute(update(Job).where(*where).values(reason=reason))


def _next_jobs(conn: Connection, key: str, project: str, owner: str, n: int) -> list[_Waiting]:
    rows = conn.execute(
        select(Job.id, Job.attempt, Job.priority, Job.campaign_id, Job.reason)
        .where(Job.state == QUEUED, Job.device_key == key, Job.project == project)
        .where(_owned_by(owner))
        .order_by(Job.priority.desc(), Job.id)
        .limit(n)
    )
    return [_Waiting(i, a, p, c, r.startswith(holds.HELD)) for i, a, p, c, r in rows]


def _take(
    conn: Connection, picks: Sequence[tuple[str, _Waiting]], now: datetime
) -> list[SendOrder]:
    """Mark the picked jobs dispatched; their send orders (with their campaigns' limits)."""
    if not picks:
        return []
    ids = {w.campaign_id for _, w in picks}
    settings = dict(
        conn.execute(select(Campaign.id, Campaign.settings).where(Campaign.id.in_(ids))).all()
    )
    orders = []
    for key, w in picks:
        if not jobs.take_for_sending(conn, w.job_id, w.attempt, w.held, now):
            continue
        s = settings.get(w.campaign_id) or {}
        orders.append(
            SendOrder(
                w.job_id,
                w.attempt,
                key,
                w.priority,
                soft_limit_s=s.get("soft_limit_s"),
                hard_limit_s=s.get("hard_limit_s"),
            )
        )
    return orders
