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
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, literal, select

from farm_core import jobs, reservations
from farm_core.failure_streaks import DEVICE_FAILED
from farm_core.pair_chunks import chunks
from farm_core.schema import (
    DISPATCHED,
    QUEUED,
    Attempt,
    Campaign,
    Device,
    Job,
    utcnow,
)
from farm_core.selectors import parse_selector
from farm_core.settings import Timing

log = logging.getLogger(__name__)

#: The attempt outcome of a job sent back to its planned device.
RETURNED = "returned"
#: Attempt outcomes after which a job does not return to that device (jobs.place avoids it).
FAILED_THERE = ("device_error", "lease_expired", "worker_lost", DEVICE_FAILED)


def bring_back(engine: Engine, timing: Timing, now: datetime | None = None) -> list[int]:
    """Return not-started jobs to their planned devices where those are back; their ids.
    In sets: the devices read once, the jobs' failures in one query, the returns one
    UPDATE per state and attempt number (754 jobs returned one by one, three statements
    each, took seconds of a fleet pass)."""
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
        failed = _failed_there(conn, [j.id for j in away])
        going = [
            j
            for j in away
            if (j.selector, j.config, j.planned_device) in homes
            and (
                held.get(j.planned_device) is None
                or held[j.planned_device].holds(j.project, j.owner)
            )
            and (j.id, j.planned_device) not in failed
        ]
        returned = _send_home(conn, going, now)
    if returned:
        log.info("%d job(s) returned to their planned devices: %s", len(returned), returned)
    return returned


def _homes(conn: Connection, away: list, timing: Timing, now: datetime) -> set[tuple]:
    """(selector, config, planned device) of the jobs whose planned device takes them now:
    online (state and heartbeat), not quarantined, running the configuration, matched by
    the selector (jobs.eligible_devices's rules for the device itself), the devices read
    once."""
    planned = {j.planned_device for j in away}
    devices = {
        d["key"]: d
        for d in conn.execute(
            select(Device.__table__).where(Device.key.in_(planned), *jobs.live_device(timing, now))
        ).mappings()
    }
    ok = set()
    for selector_text, config, key in {(j.selector, j.config, j.planned_device) for j in away}:
        device = devices.get(key)
        selector, _ = parse_selector(selector_text)
        if device is not None and selector is not None and jobs.takes(device, selector, config):
            ok.add((selector_text, config, key))
    return ok


def _failed_there(conn: Connection, job_ids: list[int]) -> set[tuple[int, str]]:
    """(job, device) pairs where the job failed for the device's reasons."""
    failed: set[tuple[int, str]] = set()
    for part in chunks(job_ids):
        rows = conn.execute(
            select(Attempt.job_id, Attempt.device_key).where(
                Attempt.job_id.in_(part), Attempt.outcome.in_(FAILED_THERE)
            )
        )
        failed.update((job_id, key) for job_id, key in rows)
    return failed


def _send_home(conn: Connection, going: list, now: datetime) -> list[int]:
    """Queue each of `going` on its planned device as a new attempt, unless it changed
    meanwhile (claimed, cancelled, moved): a compare-and-set on its state and attempt, one
    statement per state and attempt number (jobs.cas_many); their attempts noted
    `returned`."""
    rows = {j.id: j for j in going}
    home = literal("returned to ") + Job.planned_device + literal(", back online")

    def returned(attempt: int, _ids: Sequence[int]) -> dict[str, Any]:
        return {
            "state": QUEUED,
            "attempt": attempt + 1,  # a message already out for it is stale
            "device_key": Job.planned_device,
            "worker": "",
            "lease_expires_at": None,
            "reason": home,
            "updated_at": now,
        }

    sent = [
        job_id
        for state in (QUEUED, DISPATCHED)
        for job_id, _ in jobs.cas_many(
            conn, [(j.id, j.attempt) for j in going if j.state == state], state, returned
        )
    ]
    jobs.record_attempts(
        conn,
        [
            {
                "job_id": j.id,
                "attempt": j.attempt,
                "device_key": j.device_key,
                "worker": "",
                "outcome": RETURNED,
                "reason": f"returned to {j.planned_device}, back online",
            }
            for j in (rows[i] for i in sent)
        ],
        now,
    )
    return sorted(sent)
