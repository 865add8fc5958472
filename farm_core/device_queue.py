"""Each device's broker queue holds at most `queue_depth()` jobs (dispatched or running);
the rest wait in the database, queued, and are sent as the device frees a place: by
priority, then fair share between projects (farm_core.fairness), never past a project's
quota nor to a device reserved for someone else (farm_core.holds).

`fill` is called by submission (the campaign's devices), by a worker when its queue is
down to its last job (its own device; worker_agent.tasks.refill) and by every reconciler
pass (every idle live device with jobs queued for it). Fills of one device, or touching one
project with a concurrent-jobs quota, run one at a time
(farm_core.fill_locks; SQLite: BEGIN IMMEDIATE), and a job is marked dispatched before its
message is sent, so a job is never sent twice and a quota never overshot.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import (
    ARRAY,
    Connection,
    Engine,
    Integer,
    String,
    bindparam,
    exists,
    func,
    literal,
    select,
    update,
)

from delegate_runtime.env_numbers import whole_number

from . import fairness, fill_locks, holds, jobs, queue_state, quotas, reservations
from .database import Statements, transaction_block
from .dispatch import SEND_BATCH, Dispatcher, SendOrder
from .pair_chunks import chunks
from .schema import DISPATCHED, QUEUED, RUNNING, Campaign, Device, Job, utcnow

#: Overrides the depth of every device's queue (jobs dispatched or running at once).
ENV_QUEUE_DEPTH = "DEVICEFARM_QUEUE_DEPTH"
#: One running and a few waiting: a device never idles between jobs, and a project that
#: comes later waits behind at most this many jobs of others per device.
DEFAULT_QUEUE_DEPTH = 8
#: A part of a long send leaving later than this after its jobs were marked dispatched is
#: marked again first (`_send`); far below the reconciler's dispatch grace (30 s).
RESTAMP_AFTER_S = 5.0


def queue_depth() -> int:
    """Jobs a device holds at once (dispatched or running): $DEVICEFARM_QUEUE_DEPTH, else
    DEFAULT_QUEUE_DEPTH."""
    return whole_number(ENV_QUEUE_DEPTH, DEFAULT_QUEUE_DEPTH, 1, 10_000)


@dataclass
class Filled:
    """What one fill sent, why projects' jobs were held (project -> reason), and how many
    jobs each device's queue holds after it (dispatched or running)."""

    sent: list[SendOrder] = field(default_factory=list)
    broker_error: str = ""
    held: dict[str, str] = field(default_factory=dict)
    holding: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class _Waiting:
    job_id: int
    attempt: int
    priority: int
    settings: dict[str, Any]  #: its campaign's (time limits)


def jobs_out(conn: Connection, key: str) -> int:
    """Jobs device `key` holds now: dispatched or running (one count on the queue's index)."""
    return conn.execute(
        select(func.count())
        .select_from(Job)
        .where(Job.device_key == key, Job.state.in_((DISPATCHED, RUNNING)))
    ).scalar_one()


def idle_with_jobs_queued(conn: Connection) -> set[str]:
    """Devices holding no job (dispatched or running) with a job queued for them: two
    probes of the state index per device, each ending at its first row, whatever the
    backlog: 4-6 ms for 1,000 devices and 20,000 jobs on a quiet PostgreSQL, against 13-18
    for a count of each device's jobs out."""
    queued = exists().where(Job.device_key == Device.key, Job.state == QUEUED)
    busy = exists().where(Job.device_key == Device.key, Job.state.in_((DISPATCHED, RUNNING)))
    return set(conn.execute(select(Device.key).where(queued, ~busy)).scalars())


T = TypeVar("T")


def fill(
    engine: Engine,
    dispatcher: Dispatcher,
    device_keys: Iterable[str],
    now: datetime | None = None,
    depth: int | None = None,
    statements: Statements | None = None,
    per_message: int = 1,
) -> Filled:
    """Send queued jobs to `device_keys` (live devices) up to each one's queue depth.

    `statements`: a worker's own connection (farm_core.database.Statements), which its
    transactions use instead of one from `engine` (a device's consumer keeps no pool: each
    fill opened a connection, a new server process, per `queue_depth() - 1` jobs).
    `per_message`: up to this many of a device's jobs in one message (farm_core.job_batches)."""
    now = now or utcnow()
    depth = depth or queue_depth()
    keys = sorted(set(device_keys))
    out = Filled()
    if not keys:
        return out

    def plan(conn: Connection) -> tuple[list[SendOrder], dict[str, int]]:
        fill_locks.lock_devices(conn, keys)
        return _plan(conn, keys, depth, now, out.held)

    orders, room = _in_transaction(engine, statements, plan)
    taken_at = time.monotonic()
    out.holding = {k: depth - room.get(k, 0) for k in keys}
    if not orders:
        return out
    out.sent, out.broker_error = _send(
        engine, statements, dispatcher, orders, taken_at, per_message
    )
    if len(out.sent) < len(orders):
        took = {(o.job_id, o.attempt) for o in out.sent}
        back = [o for o in orders if (o.job_id, o.attempt) not in took]
        _in_transaction(engine, statements, lambda conn: jobs.take_back(conn, back))
    for o in out.sent:
        out.holding[o.device_key] += 1
    return out


def _send(
    engine: Engine,
    statements: Statements | None,
    dispatcher: Dispatcher,
    orders: Sequence[SendOrder],
    taken_at: float,
    per_message: int = 1,
) -> tuple[list[SendOrder], str]:
    """Send `orders` in parts of SEND_BATCH; a part leaving more than RESTAMP_AFTER_S after
    its jobs were marked dispatched is marked again first. The reconciler takes a
    dispatched job's message for lost when the broker lacks it past the dispatch grace
    from that mark: a slow send of thousands (a 10,000-job submission on a loaded host took
    59 s, and 4,916 unsent messages were taken for lost) must not look like a loss."""
    sent: list[SendOrder] = []
    for part in chunks(orders, SEND_BATCH):
        if time.monotonic() - taken_at > RESTAMP_AFTER_S:
            _in_transaction(engine, statements, lambda conn, p=part: _stamp(conn, p, utcnow()))
            taken_at = time.monotonic()
        done, error = dispatcher.send(part, per_message)
        sent.extend(done)
        if error:
            return sent, error
    return sent, ""


def _stamp(conn: Connection, orders: Sequence[SendOrder], now: datetime) -> None:
    """dispatched_at = now for `orders` still dispatched at their attempt."""
    by_attempt: dict[int, list[int]] = defaultdict(list)
    for o in orders:
        by_attempt[o.attempt].append(o.job_id)
    for attempt, ids in by_attempt.items():
        conn.execute(
            update(Job)
            .where(Job.id.in_(ids), Job.attempt == attempt, Job.state == DISPATCHED)
            .values(dispatched_at=now)
        )


def _in_transaction(
    engine: Engine, statements: Statements | None, fn: Callable[[Connection], T]
) -> T:
    """`fn(conn)` in one transaction: on `statements`' connection when given, else on one
    of `engine`'s."""
    if statements is None:
        with engine.begin() as conn:
            return fn(conn)

    def block(conn: Connection) -> T:
        with transaction_block(conn):
            return fn(conn)

    return statements.run(block)


def _plan(
    conn: Connection, keys: list[str], depth: int, now: datetime, held: dict[str, str]
) -> tuple[list[SendOrder], dict[str, int]]:
    """Pick each device's next jobs and mark them dispatched; the orders to send, and the
    places each device's queue had free before."""
    state = queue_state.read(conn, keys, depth, now)
    if not state.groups:
        return [], state.room
    room = state.room
    quota = {g.project: g.quota for g in state.groups if g.quota.limited()}
    capped = [p for p, q in quota.items() if q.max_concurrent_jobs is not None]
    fill_locks.lock_projects(conn, capped)  # before their jobs out are counted
    shares = _shares(conn, state.groups, quota, capped)
    daily = {
        p: quotas.minutes_reason(q, quotas.minutes_today(conn, p, now))
        for p, q in quota.items()
        if q.device_minutes_per_day is not None
    }
    reserved = reservations.active_on(conn, state.reserved, now) if state.reserved else {}
    wanted: list[tuple[str, str, str]] = []
    for g in state.groups:
        key, project, owner = g.device_key, g.project, g.owner
        hold = reserved.get(key)
        why = hold.wait_reason() if hold and not hold.holds(project, owner) else ""
        why = why or daily.get(project, "")
        if not why and shares[project].room == 0:
            why = quotas.concurrent_reason(quota[project], shares[project].out)
        if why:
            held[project] = why
            _note(conn, key, project, owner, holds.held(why))
            continue
        if g.held:
            _note(conn, key, project, owner, "")
        wanted.append((key, project, owner))
    waiting = _next_jobs(conn, wanted, room)
    by_device: dict[str, dict[tuple[str, str], list[_Waiting]]] = defaultdict(dict)
    for key, project, owner in wanted:
        by_device[key][(project, owner)] = waiting.get((key, project, owner), [])
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
    return orders, room


def _shares(
    conn: Connection,
    groups: list[queue_state.Group],
    quota: dict[str, quotas.Quota],
    capped: list[str],
) -> dict[str, fairness.Share]:
    """Each project's standing for fairness.pick. Its jobs out (one grouped query) are read
    only where they decide: between groups sharing a device, or for a capped project."""
    projects = sorted({g.project for g in groups})
    contested = bool(capped) or max(Counter(g.device_key for g in groups).values()) > 1
    active = quotas.active(conn, projects) if contested else {}
    none = quotas.Active()
    return {
        p: fairness.Share(
            active.get(p, none).jobs,
            active.get(p, none).last_sent,
            _room(quota.get(p), active.get(p, none).jobs),
        )
        for p in projects
    }


def _room(quota: quotas.Quota | None, out: int) -> int | None:
    if quota is None or quota.max_concurrent_jobs is None:
        return None
    return max(quota.max_concurrent_jobs - out, 0)


def _owned_by(owner: str) -> Any:
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


def _next_jobs(
    conn: Connection,
    groups: Sequence[tuple[str, str, str]],
    room: dict[str, int],
    one_statement: bool | None = None,
) -> dict[tuple[str, str, str], list[_Waiting]]:
    """Each group's (device, project, owner) first queued jobs, as many as its device has
    room for, by priority then id. `one_statement` (default: on PostgreSQL): a LATERAL
    pick per group, each an index range, in one statement; else a statement per group."""
    if not groups:
        return {}
    cols = (Job.id, Job.attempt, Job.priority, Campaign.settings)
    if not (conn.dialect.name == "postgresql" if one_statement is None else one_statement):
        return {
            (key, project, owner): _waiting(
                conn.execute(_pick(cols, key, project, owner, room[key]))
            )
            for key, project, owner in groups
        }
    texts = ARRAY(String)
    g = (
        func.unnest(
            bindparam("keys", [k for k, _, _ in groups], type_=texts),
            bindparam("projects", [p for _, p, _ in groups], type_=texts),
            bindparam("owners", [o for _, _, o in groups], type_=texts),
            bindparam("ns", [room[k] for k, _, _ in groups], type_=ARRAY(Integer)),
        )
        .table_valued("key", "project", "owner", "n")
        .render_derived(name="g")
    )
    pick = _pick(cols, g.c.key, g.c.project, g.c.owner, g.c.n).lateral("pick")
    rows = conn.execute(
        select(g.c.key, g.c.project, g.c.owner, *pick.c).select_from(g.join(pick, literal(True)))
    )
    out: dict[tuple[str, str, str], list[_Waiting]] = defaultdict(list)
    for key, project, owner, *job in rows:
        out[(key, project, owner)].extend(_waiting([job]))
    for jobs_of in out.values():  # a lateral join's rows need not keep the pick's order
        jobs_of.sort(key=lambda w: (-w.priority, w.job_id))
    return out


def _pick(cols: Sequence[Any], key: Any, project: Any, owner: Any, n: Any) -> Any:
    """One group's first `n` queued jobs (values or columns of the groups)."""
    return (
        select(*cols)
        .join(Campaign, Campaign.id == Job.campaign_id)
        .where(Job.state == QUEUED, Job.device_key == key, Job.project == project)
        .where(Campaign.owner == owner)
        .order_by(Job.priority.desc(), Job.id)
        .limit(n)
    )


def _waiting(rows: Iterable[Sequence[Any]]) -> list[_Waiting]:
    return [_Waiting(i, a, p, s or {}) for i, a, p, s in rows]


def _take(
    conn: Connection, picks: Sequence[tuple[str, _Waiting]], now: datetime
) -> list[SendOrder]:
    """Mark the picked jobs dispatched; their send orders (with their campaigns' limits),
    in the order picked."""
    taken = jobs.take_many(conn, [(w.job_id, w.attempt) for _, w in picks], now)
    return [
        SendOrder(
            w.job_id,
            w.attempt,
            key,
            w.priority,
            soft_limit_s=w.settings.get("soft_limit_s"),
            hard_limit_s=w.settings.get("hard_limit_s"),
        )
        for key, w in picks
        if (w.job_id, w.attempt) in taken
    ]
