"""What a fill of device queues (farm_core.device_queue) reads first, in one statement:
each device's jobs out (dispatched or running), its queued jobs in groups of one project
and one owner with the project's quotas, and whether a reservation is on for it now.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, and_, bindparam, case, func, select

from .holds import HELD
from .quotas import Quota
from .schema import DISPATCHED, QUEUED, RUNNING, Campaign, Job, Project, Reservation


@dataclass(frozen=True)
class Group:
    """A device's queued jobs of one project and owner."""

    device_key: str
    project: str
    owner: str
    held: int  #: how many say they were held (farm_core.holds)
    quota: Quota  #: the project's


@dataclass(frozen=True)
class QueueState:
    room: dict[str, int]  #: device -> places free in its queue (devices with some)
    groups: list[Group]  #: queued jobs on the devices with room
    reserved: list[str]  #: devices with room and a reservation on now


def _when(condition: object) -> object:
    return func.sum(case((condition, 1), else_=0))


_RESERVATION_ON = (
    select(Reservation.id)
    .where(
        Reservation.device_key == Job.device_key,
        Reservation.cancelled_at.is_(None),
        Reservation.starts_at <= bindparam("now"),
        Reservation.ends_at > bindparam("now"),
    )
    .limit(1)
    .scalar_subquery()
)
_LIMITS = (Project.max_concurrent_jobs, Project.device_minutes_per_day)
_READ = (
    select(
        Job.device_key,
        Job.project,
        Campaign.owner,
        *_LIMITS,
        _when(Job.state.in_((DISPATCHED, RUNNING))).label("out"),
        _when(Job.state == QUEUED).label("queued"),
        _when(and_(Job.state == QUEUED, Job.reason.like(f"{HELD}%"))).label("held"),
        _RESERVATION_ON.label("reservation"),
    )
    .join(Campaign, Campaign.id == Job.campaign_id)
    .outerjoin(Project, Project.name == Job.project)
    .where(
        Job.state.in_((QUEUED, DISPATCHED, RUNNING)),
        Job.device_key.in_(bindparam("keys", expanding=True)),
    )
    .group_by(Job.device_key, Job.project, Campaign.owner, *_LIMITS)
)


def read(conn: Connection, keys: Sequence[str], depth: int, now: datetime) -> QueueState:
    """The queues of `keys` (each holding at most `depth` jobs) at `now`."""
    rows = conn.execute(_READ, {"keys": list(keys), "now": now}).all()
    out: Counter[str] = Counter()
    for r in rows:
        out[r.device_key] += r.out
    room = {k: depth - out[k] for k in keys if out[k] < depth}
    groups = [
        Group(r.device_key, r.project, r.owner, r.held, Quota(r.project, *r[3:5]))
        for r in rows
        if r.queued and r.device_key in room
    ]
    reserved = sorted({r.device_key for r in rows if r.reservation is not None} & set(room))
    return QueueState(room, groups, reserved)
