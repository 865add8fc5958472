"""The claim of a job that nothing holds, in one statement: the fast path of `jobs.claim`.

Most jobs belong to a project with no quota and run on a device no one has reserved now.
Then nothing needs deciding under a project's lock (farm_core.holds): the claim is one
compare-and-set (queued or dispatched -> running) that also returns the health of the
job's device, which the worker checks before it runs the job. Every other job (its
project has a quota, its device a reservation, its message is stale or a redelivery)
matches no row here and takes the plain path (`jobs.claim` with `fast=False`), which
decides exactly as before; tests/unit/test_free_claim.py compares the two.
"""

from __future__ import annotations

from sqlalchemy import bindparam, exists, func, or_, select, update

from .schema import DISPATCHED, QUEUED, RUNNING, Device, Job, Project, Reservation

JOBS = Job.__table__

#: A reservation is on for the job's device now (whoever holds it: the plain path decides).
RESERVED_NOW = exists().where(
    Reservation.device_key == JOBS.c.device_key,
    Reservation.cancelled_at.is_(None),
    Reservation.starts_at <= bindparam("now"),
    Reservation.ends_at > bindparam("now"),
)
#: The job's project has a quota (concurrent jobs or device-minutes).
LIMITED = exists().where(
    Project.name == JOBS.c.project,
    or_(Project.max_concurrent_jobs.is_not(None), Project.device_minutes_per_day.is_not(None)),
)
#: The job's device's health ('' when the device has no row or no health).
DEVICE_HEALTH = func.coalesce(
    select(Device.health).where(Device.key == JOBS.c.device_key).scalar_subquery(), ""
)

#: Every claim's compare-and-set (jobs.claim's plain path too): the job still queued or
#: dispatched at the attempt its message names. Params: jid, att.
CLAIMABLE = (
    JOBS.c.id == bindparam("jid"),
    JOBS.c.attempt == bindparam("att"),
    JOBS.c.state.in_((QUEUED, DISPATCHED)),
)
#: What a claim sets. Params: w (worker), lease (its expiry), now.
CLAIM_VALUES = {
    "state": RUNNING,
    "worker": bindparam("w"),
    "lease_expires_at": bindparam("lease"),
    "started_at": bindparam("now"),
    "updated_at": bindparam("now"),
    "progress": "",
}
#: What a claim returns: the `jobs.Claimed` columns.
CLAIMED = (
    JOBS.c.id,
    JOBS.c.attempt,
    JOBS.c.campaign_id,
    JOBS.c.model_sha256,
    JOBS.c.config,
    JOBS.c.device_key,
)
CLAIM_FREE = (
    update(JOBS)
    .where(*CLAIMABLE, ~RESERVED_NOW, ~LIMITED)
    .values(**CLAIM_VALUES)
    .returning(*CLAIMED, DEVICE_HEALTH.label("device_health"))
)
