"""The reconciler: the database is the truth, the broker is transport.

One pass (`reconcile`) marks silent devices offline, quarantines stalled devices (online,
a message waiting on their queue, nothing claimed for `stall_after_s`: their agent restarts
the consumer once the canary passes), takes back running jobs whose lease expired, moves
jobs off devices that went offline or quarantined, queues again (in sets) dispatched jobs
whose message is no longer in the broker, places queued jobs whose device is lost,
quarantined or reserved for someone else on another device of the same hardware, expires
jobs that waited too long for a device that is gone, each with its reason, and fills the
queue of every live device that holds no job (farm_core.device_queue: priority, fair share,
quotas, reservations; an agent fills its own device's queue at its last job). Every change
is a compare-and-set, so passes may overlap. Bulk work (the moves, the fill) begins only
within `Timing.pass_budget_s` (orchestrator.pass_budget); what a pass leaves is the next
pass's, which the loops start at once where jobs are left to move.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, and_, func, or_, select, update

from farm_core import device_queue, jobs, reservations
from farm_core.celery_app import queue_for, task_id
from farm_core.dispatch import Dispatcher, SendOrder
from farm_core.schema import (
    DISPATCHED,
    QUARANTINED,
    QUEUED,
    RUNNING,
    Campaign,
    Device,
    Job,
    utcnow,
)
from farm_core.settings import Timing

from .homecoming import bring_back
from .look_turns import devices_to_look_at
from .lost_messages import confirmed, requeue
from .pass_budget import PassBudget
from .probes import Probe
from .relocation import group_key, move_off, relocate

log = logging.getLogger(__name__)

#: Lease expiries (a transaction each), jobs moved off lost devices (a transaction a part,
#: what placing needs read once) and live devices per part of the fill: a pass checks its
#: budget between parts (orchestrator.pass_budget).
LEASE_PART = 20
OFF_LOST_PART = 200
FILL_PART = 250


@dataclass
class ReconcileReport:
    """What one pass did, job ids by reason."""

    went_offline: list[str] = field(default_factory=list)
    stalled: list[str] = field(default_factory=list)
    lease_expired: list[int] = field(default_factory=list)
    moved_off_lost_device: list[int] = field(default_factory=list)
    returned: list[int] = field(default_factory=list)  #: back to their planned device
    resent_lost_message: list[int] = field(default_factory=list)
    placed: list[int] = field(default_factory=list)
    expired: list[int] = field(default_factory=list)
    sent: int = 0
    #: device queues the broker probe read (those holding a dispatch past the grace)
    probed: int = 0
    broker_error: str = ""
    #: seconds per part of the pass (devices, jobs, probe, moves, lost, relocate, send, home,
    #: fill)
    phases: dict[str, float] = field(default_factory=dict)
    #: jobs (devices, for the fill) left for the next pass by step, its budget spent
    deferred: dict[str, int] = field(default_factory=dict)

    def moves_left(self) -> bool:
        """Jobs to move were left for the next pass, which should come at once (devices
        left unfilled wait for the next pass in turn: their agents fill them as jobs end)."""
        return any(step != "fill" for step in self.deferred)

    @contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.phases[phase] = self.phases.get(phase, 0.0) + time.perf_counter() - start

    def changed(self) -> bool:
        return any(
            (
                self.went_offline,
                self.stalled,
                self.lease_expired,
                self.moved_off_lost_device,
                self.returned,
                self.resent_lost_message,
                self.placed,
                self.expired,
            )
        )


def _when(t: datetime | None) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S UTC") if t else "never"


def mark_offline(engine: Engine, timing: Timing, now: datetime) -> list[str]:
    """online -> offline for devices with no heartbeat for `offline_after_s`."""
    cutoff = now - timedelta(seconds=timing.offline_after_s)
    with engine.begin() as conn:
        keys = list(
            conn.execute(
                update(Device)
                .where(Device.state == "online", Device.last_seen < cutoff)
                .values(state="offline")
                .returning(Device.key)
            ).scalars()
        )
    return keys


def _device_status(engine: Engine, timing: Timing, now: datetime) -> dict[str, tuple]:
    """key -> (alive, healthy, last_seen). A device its agent marked offline is not alive."""
    cutoff = now - timedelta(seconds=timing.offline_after_s)
    with engine.begin() as conn:
        rows = conn.execute(select(Device.key, Device.last_seen, Device.health, Device.state)).all()
    return {
        k: (seen >= cutoff and state == "online", health != QUARANTINED, seen)
        for k, seen, health, state in rows
    }


def quarantine_stalled(
    engine: Engine,
    active: list,
    status: dict[str, tuple],
    in_broker: set[str],
    timing: Timing,
    now: datetime,
) -> list[str]:
    """Quarantine online, healthy devices with a message waiting in the broker for longer
    than `stall_after_s` that run nothing and have claimed nothing for as long."""
    cutoff = now - timedelta(seconds=timing.stall_after_s)
    waiting: dict[str, tuple[int, datetime]] = {}
    for j in active:
        alive, healthy, _ = status.get(j.device_key, (False, False, None))
        if (
            j.state == DISPATCHED
            and alive
            and healthy
            and j.dispatched_at is not None
            and j.dispatched_at < cutoff
            and task_id(j.id, j.attempt) in in_broker
        ):
            oldest = waiting.get(j.device_key)
            if oldest is None or j.dispatched_at < oldest[1]:
                waiting[j.device_key] = (j.id, j.dispatched_at)
    if not waiting:
        return []
    with engine.begin() as conn:
        busy = conn.execute(
            select(Job.device_key)
            .where(Job.state == RUNNING, Job.device_key.in_(list(waiting)))
            .distinct()
        ).scalars()
        for key in busy:
            del waiting[key]
        last_claim = dict(
            conn.execute(
                select(Job.device_key, func.max(Job.started_at))
                .where(Job.device_key.in_(list(waiting)))
                .group_by(Job.device_key)
            ).all()
        )
        stalled = []
        for key, (job_id, since) in sorted(waiting.items()):
            claimed = last_claim.get(key)
            if claimed is not None and claimed >= cutoff:
                continue
            why = (
                f"stalled: job {job_id} waiting on its queue since {_when(since)}, "
                f"last claim {_when(claimed)} (stall_after_s={timing.stall_after_s:g})"
            )
            done = conn.execute(
                update(Device)
                .where(Device.key == key, Device.health != QUARANTINED)
                .values(health=QUARANTINED, health_reason=why)
            )
            if done.rowcount:
                log.warning("%s %s", key, why)
                stalled.append(key)
    for key in stalled:  # its waiting jobs move this pass
        alive, _, seen = status[key]
        status[key] = (alive, False, seen)
    return stalled


def _may_need_work(
    live: list[str],
    reserved: list[str],
    grace: datetime,
    now: datetime,
    looking: list[str] | None = None,
) -> Any:
    """The active jobs a pass looks at: running ones whose lease expired, dispatched ones
    past the grace on a device it looks at (`looking`, None: every one; a message to find,
    a stall) or on a device not live, queued ones on a device not live or reserved. Queued
    jobs waiting their turn on live devices, most of a backlog, are the fill's (10,000 rows
    read each pass took 0.6-0.7 s of a fleet's pass under load); running ones within their
    lease, a job per busy device, need nothing."""
    overdue = Job.dispatched_at < grace
    if looking is not None:
        overdue = and_(overdue, Job.device_key.in_(looking))
    return or_(
        and_(Job.state == RUNNING, Job.lease_expires_at < now),
        and_(Job.state == DISPATCHED, or_(overdue, Job.device_key.not_in(live))),
        and_(
            Job.state == QUEUED,
            or_(Job.device_key.not_in(live), Job.device_key.in_(reserved)),
        ),
    )


def reconcile(
    engine: Engine,
    dispatcher: Dispatcher,
    probe: Probe,
    timing: Timing,
    now: datetime | None = None,
) -> ReconcileReport:
    """One reconciliation pass; sends what it re-dispatches."""
    now = now or utcnow()
    report = ReconcileReport()
    budget = PassBudget(timing.pass_budget_s)
    report.deferred = budget.deferred

    with report.timed("devices"):
        report.went_offline = mark_offline(engine, timing, now)
        status = _device_status(engine, timing, now)
    orders: list[SendOrder] = []

    def move(job_id: int, state: str, attempt: int, bucket: list[int], **kw) -> None:
        with engine.begin() as conn:
            order = jobs.place(
                conn, job_id, timing, expect_state=state, expect_attempt=attempt, now=now, **kw
            )
        bucket.append(job_id)
        if order is not None:
            orders.append(order)

    grace = now - timedelta(seconds=timing.dispatch_grace_s)
    live = [k for k, (alive, healthy, _) in status.items() if alive and healthy]
    looking = devices_to_look_at(probe, live, timing.probe_devices, now)
    with report.timed("jobs"), engine.begin() as conn:
        reserved = reservations.active_on(conn, None, now)
        active = conn.execute(
            select(
                Job.id,
                Job.state,
                Job.attempt,
                Job.device_key,
                Job.worker,
                Job.lease_expires_at,
                Job.dispatched_at,
                Job.updated_at,
                Job.reason,
                Job.project,
                Job.campaign_id,
                Job.planned_device,
                Job.config,
                Campaign.owner,
            )
            .join(Campaign, Campaign.id == Job.campaign_id)
            .where(_may_need_work(live, list(reserved), grace, now, looking))
        ).all()

    away: dict[tuple, list[int]] = {}  #: queued jobs on devices reserved for others
    lost_queued = []  #: queued jobs on lost or quarantined devices, placed in sets
    lost_messages = []  #: dispatched jobs the broker no longer holds, queued again in sets
    off_lost = []  #: dispatched jobs on lost or quarantined devices, moved in sets
    lost_devices: dict[str, str] = {}  #: why, by device
    in_broker: set[str] | None = None
    live_set = set(live)
    # the broker is read only for the queues of live devices holding a dispatch past the
    # grace (a message lost, or a device stalled, can be found only there)
    overdue = {
        queue_for(j.device_key)
        for j in active
        if j.state == DISPATCHED and (j.dispatched_at or now) < grace and j.device_key in live_set
    }
    report.probed = len(overdue)
    if overdue:
        with report.timed("probe"):
            in_broker = probe(sorted(overdue))

    if in_broker is not None:
        with report.timed("stalled"):
            report.stalled = quarantine_stalled(engine, active, status, in_broker, timing, now)

    moves_started = time.perf_counter()
    leases = []  #: running jobs whose lease expired, moved a transaction each
    for j in active:
        alive, healthy, seen = status.get(j.device_key, (False, False, None))
        if j.state == RUNNING:
            if j.lease_expires_at is not None and j.lease_expires_at < now:
                leases.append(j)
        elif j.state == DISPATCHED:
            if not alive or not healthy:
                off_lost.append(j)
                lost_devices[j.device_key] = (
                    f"device {j.device_key} quarantined"
                    if alive
                    else f"device {j.device_key} offline (no heartbeat since {_when(seen)})"
                )
            elif (
                in_broker is not None
                and (j.dispatched_at or now) < grace
                and task_id(j.id, j.attempt) not in in_broker
            ):
                lost_messages.append(j)
        elif j.state == QUEUED and alive and healthy:
            hold = reserved.get(j.device_key)
            if hold is not None and not hold.holds(j.project, j.owner):
                away.setdefault(group_key(j), []).append(j.id)
            # else it waits its turn in its device's queue (filled below)
        elif j.state == QUEUED and (j.updated_at or now) < grace:
            lost_queued.append(j)

    for part in budget.move_parts("lease expired", leases, LEASE_PART):
        for j in part:
            move(
                j.id,
                RUNNING,
                j.attempt,
                report.lease_expired,
                outcome="lease_expired",
                reason=f"lease expired on {j.device_key} at {_when(j.lease_expires_at)} "
                f"(worker {j.worker} lost, or past its hard time limit)",
                count_failure=True,
                prefer_other=True,
                worker=j.worker,
            )
    report.phases["moves"] = time.perf_counter() - moves_started
    with report.timed("off lost devices"):
        if off_lost:
            moved = move_off(
                engine,
                off_lost,
                lost_devices,
                timing,
                now,
                parts=lambda rows: budget.move_parts("off lost devices", rows, OFF_LOST_PART),
            )
            report.moved_off_lost_device = moved.moved
            report.expired += moved.expired
    with report.timed("lost"):
        lost_messages = confirmed(probe, lost_messages, now, timing.lost_confirm_s, looking)
        if lost_messages:
            with engine.begin() as conn:
                report.resent_lost_message = requeue(conn, lost_messages, now)
    with report.timed("relocate"):
        if budget.begins("relocate", len(lost_queued)):
            report.expired += relocate(engine, lost_queued, timing, now).expired
        if away:
            _away_from_reservations(engine, away, timing, now)
    if orders:
        with report.timed("send"):
            sent, report.broker_error = dispatcher.send(orders)
            report.sent = len(sent)
            with engine.begin() as conn:
                jobs.mark_sent(conn, sent, now)
    with report.timed("home"):
        if not budget.spent():  # before the queues fill; else the next pass's
            report.returned = bring_back(engine, timing, now)
    with report.timed("fill"):
        live = [k for k, (alive, healthy, _) in status.items() if alive and healthy]
        # a device holding a job is filled by its agent when the job leaves it its last
        # (worker_agent.tasks.refill): topping up every live device, a 1,000-device fleet's
        # passes sent 100-490 jobs to devices with work enough, and where a device held
        # one, took the farm's fill lock against the agent filling it and sent none
        with engine.connect() as conn:
            idle = device_queue.idle_with_jobs_queued(conn)
        live = [k for k in live if k in idle]
        random.shuffle(live)  # a pass whose budget runs out fills a part at random
        for part in budget.fill_parts(live, FILL_PART):
            filled = device_queue.fill(engine, dispatcher, part, now)
            report.placed.extend(o.job_id for o in filled.sent)
            report.sent += len(filled.sent)
            if filled.broker_error:
                report.broker_error = report.broker_error or filled.broker_error
                break
    if report.changed():
        log.info("reconcile: %s", report)
    return report


def _away_from_reservations(
    engine: Engine, away: dict[tuple, list[int]], timing: Timing, now: datetime
) -> None:
    """Move queued jobs off devices reserved for others, onto a free device of the same
    hardware that their selector matches; those with none stay, and wait (the device's
    fill notes until when)."""
    with engine.begin() as conn:
        reserved = reservations.active_on(conn, None, now)
        for (campaign_id, key, planned, config, project, owner), ids in away.items():
            hold = reserved.get(key)
            if hold is None:  # cancelled meanwhile: they stay
                continue
            selector = conn.execute(
                select(Campaign.selector).where(Campaign.id == campaign_id)
            ).scalar_one()
            others = [
                k
                for k in jobs.eligible_devices(conn, selector, config, timing, now, like=planned)
                if k != key and (k not in reserved or reserved[k].holds(project, owner))
            ]
            pick = jobs.choose_device(conn, others, key, set(), prefer_other=True)
            if pick is None:
                continue
            why = f"moved from {key}: {hold.wait_reason()}"
            conn.execute(
                update(Job)
                .where(Job.id.in_(ids), Job.state == QUEUED, Job.device_key == key)
                .values(device_key=pick, reason=why, updated_at=now)
            )
            log.info("%d queued job(s) moved from reserved %s to %s", len(ids), key, pick)
