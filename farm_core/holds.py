"""Why a job may not start now: a reservation of its device by someone else, or its
project at a quota (farm_core.reservations, farm_core.quotas). The worker asks at claim
time (`before_start`); device_queue asks before sending, per project.

Every such reason starts with HELD, so that a job that may go again loses it.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from sqlalchemy import Connection, and_, select, text

from . import quotas
from .database import transaction_block
from .reservations import Held
from .schema import Campaign, Job, Project, Reservation

#: The start of every reason a job waits for (a reservation, a quota).
HELD = "waiting: "


def held(why: str) -> str:
    """`why` as a waiting job's reason ('' stays '')."""
    return f"{HELD}{why}" if why else ""


@contextmanager
def project_lock(conn: Connection, project: str) -> Iterator[None]:
    """One claim at a time of `project` on PostgreSQL, so that two workers cannot both
    take the last slot of its quota (SQLite: BEGIN IMMEDIATE already serializes). The lock
    is transaction-scoped, held to the end of the block's transaction (the claim's
    autocommit connection gets one of its own: database.transaction_block), so that no
    lock outlives its session behind a transaction-mode pooler."""
    if conn.dialect.name != "postgresql":
        yield
        return
    key = zlib.crc32(f"devicefarm-quota:{project}".encode())
    with transaction_block(conn):
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})
        yield


@contextmanager
def before_start(conn: Connection, job_id: int, now: datetime) -> Iterator[str]:
    """The reason job `job_id` may not start now on its device ('' when it may), computed
    and held under the project's lock while the caller claims it. One query for a job with
    no quota and no reservation in the way."""
    on = and_(
        Reservation.device_key == Job.device_key,
        Reservation.cancelled_at.is_(None),
        Reservation.starts_at <= now,
        Reservation.ends_at > now,
    )
    row = conn.execute(
        select(
            Job.project,
            Campaign.owner,
            Project.max_concurrent_jobs,
            Project.device_minutes_per_day,
            *(getattr(Reservation, c).label(f"r_{c}") for c in _HELD_COLUMNS),
        )
        .join(Campaign, Campaign.id == Job.campaign_id)
        .outerjoin(Project, Project.name == Job.project)
        .outerjoin(Reservation, on)
        .where(Job.id == job_id)
    ).first()
    if row is None:
        yield ""
        return
    if row.r_id is not None:
        hold = Held(*(row._mapping[f"r_{c}"] for c in _HELD_COLUMNS))
        if not hold.holds(row.project, row.owner):
            yield held(hold.wait_reason())
            return
    quota = quotas.Quota(row.project, row.max_concurrent_jobs, row.device_minutes_per_day)
    if not quota.limited():
        yield ""
        return
    with project_lock(conn, row.project):
        yield held(start_reason(conn, quota, now))


def start_reason(conn: Connection, quota: quotas.Quota, now: datetime) -> str:
    """Why a job of `quota.project` may not start now ('' when it may): its running jobs
    at the concurrent quota, or today's device-minutes used."""
    if quota.max_concurrent_jobs is not None:
        why = quotas.concurrent_reason(quota, quotas.running(conn, quota.project))
        if why:
            return why
    if quota.device_minutes_per_day is not None:
        return quotas.minutes_reason(quota, quotas.minutes_today(conn, quota.project, now))
    return ""


_HELD_COLUMNS = (
    "id",
    "device_key",
    "user",
    "project",
    "starts_at",
    "ends_at",
    "reason",
    "cancelled_at",
)
