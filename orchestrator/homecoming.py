"""Jobs go home: a job moved off its planned device (lost, quarantined, reserved by someone
else) that has not started goes back there once that device is online and healthy again.

A campaign plans each job on a device its selector matched: a lab expects a per-device
measurement to run on that device, and a move is a stand-in while it is away. A job
returns when its planned device is eligible for it again (online, heartbeat fresh, not
quarantined, matched by its campaign's selector, runs its configuration) and not reserved
for someone else. A job that failed there for the device's reasons (`jobs.place`'s tried
devices) stays where it is, and a running job is never moved. The return is a new attempt,
queued on the planned device (its queue sends it in turn), with an attempt row `returned`
and the reason "returned to <device>, back online" that `devicefarm status` shows.
"""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy import Connection, Engine, select, update

from farm_core import jobs, reservations
from farm_core.failure_streaks import DEVICE_FAILED
from farm_core.schema import DISPATCHED, QUEUED, Attempt, Campaign, Job, utcnow
from farm_core.settings import Timing

log = logging.getLogger(__name__)

#: The attempt outcome of a job sent back to its planned device.
RETURNED = "returned"
#: Attempt outcomes after which a job does not return to that device (jobs.place avoids it).
FAILED_THERE = ("device_error", "lease_expired", "worker_lost", DEVICE_FAILED)


def bring_back(engine: Engine, timing: Timing, now: datetime | None = None) -> list[int]:
    """Return not-started jobs to their planned devices where those are back; their ids."""
    now = now or utcnow()
    with engine.begin() as conn:
        away = conn.execute(
            select(
                Job.id,
                Job.state,
                Job.attempt,
                Job.device_key,
                Job.planned_device,
                Job.config,
                Job.project,
                Campaign.selector,
                Campaign.owner,
            )
            .join(Campaign, Campaign.id == Job.campaign_id)
            .where(Job.state.in_((QUEUED, DISPATCHED)), Job.device_key != Job.planned_device)
        ).all()
        if not away:
            return []
        homes = _homes(conn, away, timing, now)
        if not homes:
            return []
        held = reservations.active_on(conn, {j.planned_device for j in away}, now)
        returned = []
        for j in away:
            if (j.selector, j.config, j.planned_device) not in homes:
                continue
            hold = held.get(j.planned_device)
            if hold is not None and not hold.holds(j.project, j.owner):
                continue
            if _failed_there(conn, j.id, j.planned_device):
                continue
            if _send_home(conn, j, now):
                returned.append(j.id)
    if returned:
        log.info("%d job(s) returned to their planned devices: %s", len(returned), returned)
    return returned


def _homes(conn: Connection, away: list, timing: Timing, now: datetime) -> set[tuple]:
    """(selector, config, planned device) of the jobs whose planned device takes them now."""
    ok = set()
    for selector, config, planned in {(j.selector, j.config, j.planned_device) for j in away}:
        if planned in jobs.eligible_devices(conn, selector, config, timing, now, like=planned):
            ok.add((selector, config, planned))
    return ok


def _failed_there(conn: Connection, job_id: int, device_key: str) -> bool:
    return (
        conn.execute(
            select(Attempt.id).where(
                Attempt.job_id == job_id,
                Attempt.device_key == device_key,
                Attempt.outcome.in_(FAILED_THERE),
            )
        ).first()
        is not None
    )


def _send_home(conn: Connection, j, now: datetime) -> bool:
    """Queue job `j` on its planned device as a new attempt, unless it changed meanwhile
    (claimed, cancelled, moved): a compare-and-set on its state and attempt."""
    why = f"returned to {j.planned_device}, back online"
    done = conn.execute(
        update(Job)
        .where(Job.id == j.id, Job.state == j.state, Job.attempt == j.attempt)
        .values(
            state=QUEUED,
            attempt=j.attempt + 1,  # a message already out for it is stale
            device_key=j.planned_device,
            worker="",
            lease_expires_at=None,
            reason=why,
            updated_at=now,
        )
    )
    if done.rowcount != 1:
        return False
    jobs.record_attempt(conn, j.id, j.attempt, j.device_key, "", RETURNED, why, now)
    return True
