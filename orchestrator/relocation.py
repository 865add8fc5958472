"""Queued jobs whose device is lost or quarantined, placed in sets.

The reconciler used to place each such job in a transaction of its own (its selector, the
eligible devices, the reservations and the loads read again per job): 6,667 jobs waiting
for a device that was gone cost 27-33 s on every pass (issue 44). Here the jobs are taken
in groups that go to the same devices (one campaign, device, planned hardware,
configuration, project and owner). The live devices, the planned devices' hardware, the
campaigns' selectors, the reservations, the loads and the devices each job failed on are
read once a pass; per group the eligible devices are picked from them (as
jobs.eligible_devices would), the jobs are spread over the free ones (untried first, then
the least loaded, counting the jobs given out in this pass) and moved in one statement
per attempt number (each job's device looked up by its id: jobs.text_by). Jobs that no
device takes wait (one statement marks those not yet waiting) or, past `device_gone_s`,
expire (one statement). Each such statement takes at most 500 jobs (farm_core.pair_chunks). Every change is a compare-and-set on (id, attempt)
in the state the job was read in (queued; dispatched for `move_off`), as jobs.place's.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, case, func, literal, select, tuple_, update

from farm_core import holds, reservations
from farm_core.jobs import (
    HARDWARE,
    JOBS,
    WAITING,
    cas_many,
    live_device,
    record_attempts,
    takes,
    text_by,
)
from farm_core.pair_chunks import chunks
from farm_core.schema import (
    ACTIVE_STATES,
    DISPATCHED,
    QUEUED,
    TIMED_OUT,
    Attempt,
    Campaign,
    Device,
    Job,
)
from farm_core.selectors import parse_selector
from farm_core.settings import Timing

#: The attempt outcome of a dispatch moved off a lost or quarantined device.
DEVICE_LOST = "device_lost"
#: Attempt outcomes that make a device one to avoid for the job (as jobs.place).
_FAILED_THERE = ("device_error", "lease_expired", "worker_lost")


@dataclass
class Relocated:
    """Job ids by what became of them."""

    moved: list[int] = field(default_factory=list)  #: onto another device's queue
    held: list[int] = field(default_factory=list)  #: to a device reserved for now
    waiting: list[int] = field(default_factory=list)  #: newly marked waiting
    expired: list[int] = field(default_factory=list)

    def add(self, other: Relocated) -> None:
        for name in ("moved", "held", "waiting", "expired"):
            getattr(self, name).extend(getattr(other, name))


def _whole(rows: Sequence[Any]) -> Iterator[Sequence[Any]]:
    yield rows


def group_key(j: Any) -> tuple:
    """Queued jobs that go to the same devices: same campaign, hardware, configuration."""
    return (j.campaign_id, j.device_key, j.planned_device, j.config, j.project, j.owner)


def relocate(engine: Engine, lost: Sequence[Any], timing: Timing, now: datetime) -> Relocated:
    """Place `lost` (reconciler rows of queued jobs on lost or quarantined devices, each
    waiting past the dispatch grace) on other devices, in sets; expire those that waited
    past `device_gone_s` with none."""
    if not lost:
        return Relocated()
    with engine.begin() as conn:
        return _place(conn, lost, timing, now, _Writes())


def move_off(
    engine: Engine,
    lost: Sequence[Any],
    why: dict[str, str],
    timing: Timing,
    now: datetime,
    parts: Callable[[Sequence[Any]], Iterator[Sequence[Any]]] = _whole,
) -> Relocated:
    """Dispatched jobs on lost or quarantined devices (reconciler rows), each placed as
    `relocate` places queued ones (those no device takes wait) with `why[its device]` as
    its reason and its attempt noted `device_lost`, a transaction for each of `parts(the
    jobs by device)` (all at once by default; the reconciler's budget stops it between
    two): a late claim of an old message waits for it, then finds a new attempt. What
    placing needs is read once, in the first part's transaction, for every part: read per
    part, a 200-job part had cost as much as all 800 of a lost host (0.4-1.0 s under a
    fleet's load). Each job is written once, from dispatched straight to queued at its
    next attempt (one UPDATE per attempt number and 500 jobs; a first UPDATE back to
    queued, then the placing one, cost 8,000 jobs of 1,000 lost devices a third of their
    pass)."""
    done = Relocated()
    if not lost:
        return done
    # placed as queued jobs that began waiting now, with their new reason
    rows = sorted(
        (_Row(j, updated_at=now, reason=why[j.device_key]) for j in lost),
        key=lambda j: (j.device_key, j.id),
    )
    keys = {j.device_key for j in lost}
    with engine.connect() as conn:

        def by_device(texts: dict[str, str]) -> Any:
            return text_by(conn, JOBS.c.device_key, texts, else_=JOBS.c.reason)

        writes = _Writes(
            from_state=DISPATCHED,
            values={"state": QUEUED, "reason": by_device({k: why[k] for k in keys})},
            waiting=by_device({k: f"{why[k]}; {WAITING}" for k in keys}),
        )
        places: _Places | None = None
        for part in parts(rows):
            with conn.begin():
                if places is None:
                    places = _Places.read(conn, rows, timing, now, writes)
                got = _place(conn, part, timing, now, writes, places)
                changed = set(got.moved + got.held + got.waiting + got.expired)
                entries = [
                    {
                        "job_id": j.id,
                        "attempt": j.attempt,
                        "device_key": j.device_key,
                        "worker": j.worker or "",
                        "outcome": DEVICE_LOST,
                        "reason": why[j.device_key],
                    }
                    for j in part
                    if j.id in changed
                ]
                record_attempts(conn, entries, now)
            done.add(got)
    return done


@dataclass(frozen=True)
class _Writes:
    """How `_place` writes its jobs: from which state, with which values besides the
    placing ones, and the reason of those that begin waiting (default: their reason, and
    that they wait)."""

    from_state: str = QUEUED
    values: dict[str, Any] = field(default_factory=dict)
    waiting: Any = None


class _Row:
    """A reconciler row with some of its fields replaced."""

    def __init__(self, row: Any, **changes: Any) -> None:
        self._row, self._changes = row, changes

    def __getattr__(self, name: str) -> Any:
        return self._changes[name] if name in self._changes else getattr(self._row, name)


def _groups(rows: Sequence[Any]) -> dict[tuple, list[Any]]:
    groups: dict[tuple, list[Any]] = defaultdict(list)
    for j in rows:
        groups[group_key(j)].append(j)
    return groups


def _place(
    conn: Connection,
    lost: Sequence[Any],
    timing: Timing,
    now: datetime,
    writes: _Writes,
    places: _Places | None = None,
) -> Relocated:
    """Place `lost` on `places` (read for them, or for more rows than these, in this
    transaction or an earlier one of the same pass)."""
    done = Relocated()
    groups = _groups(lost)
    unplaced: list[Any] = []
    if places is None:
        places = _Places.read(conn, lost, timing, now, writes)
    places.conn = conn
    if places.live:
        picks: dict[tuple[int, int], str] = {}
        for (campaign_id, key, planned, config, project, owner), rows in groups.items():
            free, held = places.free_and_held(campaign_id, planned, config, project, owner)
            if free:
                picks |= places.spread(rows, free, key)
            elif held:
                done.held += places.hold(rows, held, key)
            else:
                unplaced += rows
        done.moved = _move(conn, list(picks), now, writes, to=picks)
    else:
        unplaced = list(lost)
    _wait_or_expire(conn, unplaced, timing, now, done, writes)
    return done


def _live_devices(conn: Connection, timing: Timing, now: datetime) -> list[Any]:
    """Devices that may take jobs (jobs.live_device), as mappings."""
    return list(conn.execute(select(Device.__table__).where(*live_device(timing, now))).mappings())


class _Places:
    """What one pass reads once to place every group: live devices, the planned devices'
    hardware, selectors, reservations, loads and the devices each job failed on."""

    @classmethod
    def read(
        cls, conn: Connection, rows: Sequence[Any], timing: Timing, now: datetime, writes: _Writes
    ) -> _Places:
        """What placing `rows` (or any of them) needs, read in `conn`'s transaction."""
        live = _live_devices(conn, timing, now)
        if not live:
            return cls(conn, [], {}, [], now, writes)
        return cls(conn, live, _groups(rows), [j.id for j in rows], now, writes)

    def __init__(
        self,
        conn: Connection,
        live: list[Any],
        groups: dict[tuple, list[Any]],
        job_ids: list[int],
        now: datetime,
        writes: _Writes,
    ) -> None:
        self.conn, self.live, self.now, self.writes = conn, live, now, writes
        if not live:  # nothing to place on: nothing more to read
            return
        cols = [getattr(Device, c) for c in HARDWARE]
        planned = {g[2] for g in groups}
        self.hardware = {
            k: tuple(hw)
            for k, *hw in conn.execute(select(Device.key, *cols).where(Device.key.in_(planned)))
        }
        selectors = conn.execute(
            select(Campaign.id, Campaign.selector).where(Campaign.id.in_({g[0] for g in groups}))
        )
        self.selectors = {i: parse_selector(text)[0] for i, text in selectors}
        self.reserved = reservations.active_on(conn, None, now)
        self.tried = _tried(conn, job_ids)
        self.load = _loads(conn)
        self._eligible: dict[tuple, list[str]] = {}
        self._split: dict[tuple, tuple[list[str], list[str]]] = {}
        #: `spread`'s heaps, one per list of free devices (by its identity: `_split`
        #: keeps each list) where the job's current device is not among them
        self._heaps: dict[int, list[tuple[bool, int, str]]] = {}

    def eligible(self, campaign_id: int, planned: str, config: str) -> list[str]:
        """The live devices a job of `campaign_id` planned on `planned` may run `config`
        on (once per campaign, hardware and configuration: the groups of a lost host's
        devices, one per device, share it; 100 of them scanned 900 devices each, 1.6 s)."""
        selector, hardware = self.selectors.get(campaign_id), self.hardware.get(planned)
        key = (campaign_id, hardware, config)
        if key not in self._eligible:
            self._eligible[key] = (
                []
                if selector is None or hardware is None
                else sorted(
                    d["key"]
                    for d in self.live
                    if tuple(d[c] for c in HARDWARE) == hardware and takes(d, selector, config)
                )
            )
        return self._eligible[key]

    def free_and_held(
        self, campaign_id: int, planned: str, config: str, project: str, owner: str
    ) -> tuple[list[str], list[str]]:
        """The eligible devices free for `project`'s `owner` now, and those reserved for
        someone else (once per eligibility and owner)."""
        eligible = self.eligible(campaign_id, planned, config)
        key = (campaign_id, self.hardware.get(planned), config, project, owner)
        if key not in self._split:
            free = [k for k in eligible if self.free_for(k, project, owner)]
            taken = set(free)
            self._split[key] = (free, [k for k in eligible if k not in taken])
        return self._split[key]

    def free_for(self, key: str, project: str, owner: str) -> bool:
        hold = self.reserved.get(key)
        return hold is None or hold.holds(project, owner)

    def _pick(self, j: Any, among: list[str], current: str) -> str:
        """jobs.choose_device's order, with prefer_other: untried, not the lost device,
        least loaded, then by name."""
        avoid = self.tried.get(j.id, set())
        return min(among, key=lambda k: (k in avoid, k == current, self.load[k], k))

    def spread(self, rows: list[Any], free: list[str], current: str) -> dict[tuple[int, int], str]:
        """Each of `rows` onto one of `free` in `_pick`'s order (a heap of the devices by
        load for the jobs that failed nowhere: 751 jobs over 900 devices took seconds by
        a scan each): (id, attempt) -> device, moved by the caller. Groups whose current
        device is not free (a lost one) share the heap of their free devices: a lost host's
        100 devices had each made its own of 900 (143 ms of a pass under a fleet's load)."""
        heap = self._heap(free, current)
        picks: dict[tuple[int, int], str] = {}
        for j in rows:
            if self.tried.get(j.id):
                pick = self._pick(j, free, current)
            else:
                while True:  # an entry whose load changed since it was pushed is stale
                    is_current, load, pick = heapq.heappop(heap)
                    if load == self.load[pick]:
                        break
                    heapq.heappush(heap, (is_current, self.load[pick], pick))
                heapq.heappush(heap, (is_current, load + 1, pick))
            self.load[pick] += 1
            picks[(j.id, j.attempt)] = pick
        return picks

    def _heap(self, free: list[str], current: str) -> list[tuple[bool, int, str]]:
        """A heap of `free` by (is `current`, load, key); entries whose load has changed
        since are found stale as they are popped (`spread`)."""
        shared = current not in free
        if shared and id(free) in self._heaps:
            return self._heaps[id(free)]
        heap = [(k == current, self.load[k], k) for k in free]
        heapq.heapify(heap)
        if shared:
            self._heaps[id(free)] = heap
        return heap

    def hold(self, rows: list[Any], held: list[str], current: str) -> list[int]:
        """Every device is reserved for someone else now: each job waits on one of them,
        sent when its reservation allows (jobs on that very device stay as they are)."""
        shares: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for j in rows:
            pick = self._pick(j, held, current)
            if pick != current:
                self.load[pick] += 1
                shares[pick].append((j.id, j.attempt))
        moved = []
        for pick, pairs in shares.items():
            why = holds.held(self.reserved[pick].wait_reason())
            moved += _move(self.conn, pairs, self.now, self.writes, pick, reason=why)
        return sorted(moved)


def _tried(conn: Connection, job_ids: list[int]) -> dict[int, set[str]]:
    rows = conn.execute(
        select(Attempt.job_id, Attempt.device_key).where(
            Attempt.job_id.in_(job_ids), Attempt.outcome.in_(_FAILED_THERE)
        )
    )
    tried: dict[int, set[str]] = defaultdict(set)
    for job_id, device in rows:
        tried[job_id].add(device)
    return tried


def _loads(conn: Connection) -> dict[str, int]:
    """Active jobs per device, read once a pass and counted on as jobs are given out."""
    rows = conn.execute(
        select(Job.device_key, func.count())
        .where(Job.state.in_(ACTIVE_STATES))
        .group_by(Job.device_key)
    )
    return defaultdict(int, {k: n for k, n in rows})


def _wait_or_expire(
    conn: Connection,
    rows: list[Any],
    timing: Timing,
    now: datetime,
    done: Relocated,
    writes: _Writes,
) -> None:
    """No device takes `rows`: past device_gone_s they expire (one statement); the others
    not yet waiting are marked so (one statement; a job already waiting keeps when it
    began)."""
    gone = now - timedelta(seconds=timing.device_gone_s)
    old = [(j.id, j.attempt) for j in rows if (j.updated_at or now) < gone]
    if old:
        why = f"expired after waiting over {timing.device_gone_s:g} s (device_gone_s): "
        for part in chunks(old):
            expired = conn.execute(
                update(JOBS)
                .where(
                    tuple_(JOBS.c.id, JOBS.c.attempt).in_(part),
                    JOBS.c.state == writes.from_state,
                )
                .values(
                    state=TIMED_OUT,
                    finished_at=now,
                    updated_at=now,
                    reason=literal(why) + JOBS.c.reason,
                )
                .returning(JOBS.c.id)
            )
            done.expired += sorted(expired.scalars())
    fresh = [
        (j.id, j.attempt)
        for j in rows
        if (j.updated_at or now) >= gone and not j.reason.endswith(WAITING)
    ]
    if fresh:
        waiting = writes.waiting
        if waiting is None:
            waiting = case(
                (JOBS.c.reason == "", literal(WAITING)),
                else_=JOBS.c.reason + literal(f"; {WAITING}"),
            )
        done.waiting += _move(conn, fresh, now, writes, reason=waiting)


def _move(
    conn: Connection,
    pairs: list[tuple[int, int]],
    now: datetime,
    writes: _Writes,
    device_key: str | None = None,
    to: dict[tuple[int, int], str] | None = None,
    **values: Any,
) -> list[int]:
    """`writes.from_state` at (id, attempt) -> queued at the next attempt, unleased and
    unclaimed (on `device_key`, or on `to[(id, attempt)]`, when given), with
    `writes.values` and then `values`; the ids moved. One statement per attempt number and
    500 jobs (jobs.cas_many)."""
    if device_key is not None:
        values["device_key"] = device_key

    def next_attempt(attempt: int, ids: Sequence[int]) -> dict[str, Any]:
        each = (
            {}
            if to is None
            else {"device_key": text_by(conn, JOBS.c.id, {i: to[(i, attempt)] for i in ids})}
        )
        return {
            "attempt": JOBS.c.attempt + 1,
            "worker": "",
            "lease_expires_at": None,
            "updated_at": now,
            **writes.values,
            **values,
            **each,
        }

    moved = cas_many(conn, pairs, writes.from_state, next_attempt)
    return sorted(job_id for job_id, _ in moved)
