"""What a fill of device queues (farm_core.device_queue) reads first, in one statement:
each device's jobs out (dispatched or running), its queued jobs in groups of one project
and one owner with the project's quotas, and whether a reservation is on for it now.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, Integer, and_, bindparam, case, cast, func, select

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


def _total(column: object) -> object:
    return cast(func.sum(column), Integer)  # PostgreSQL's sum of counts is numeric


_LIMITS = (Project.max_concurrent_jobs, Project.device_minutes_per_day)
#: The jobs' counts per device, project and campaign first, without a join: the campaigns
#: and projects are then joined once per group, not once per job (a device's backlog of
#: 1,632 jobs took 15 ms joined row by row, under load).
_COUNTS = (
    select(
        Job.device_key,
        Job.project,
        Job.campaign_id,
        _when(Job.state.in_((DISPATCHED, RUNNING))).label("out"),
        _when(Job.state == QUEUED).label("queued"),
        _when(and_(Job.state == QUEUED, Job.reason.like(f"{HELD}%"))).label("held"),
    )
    .where(
        Job.state.in_((QUEUED, DISPATCHED, RUNNING)),
        Job.device_key.in_(bindparam("keys", expanding=True)),
    )
    .group_by(Job.device_key, Job.project, Job.campaign_id)
    .subquery("counts")
)
_RESERVATION_ON = (
    select(Reservation.id)
    .where(
        Reservation.device_key == _COUNTS.c.device_key,
        Reservation.cancelled_at.is_(None),
        Reservation.starts_at <= bindparam("now"),
        Reservation.ends_at > bindparam("now"),
    )
    .limit(1)
    .scalar_subquery()
)
_READ = (
    select(
        _COUNTS.c.device_key,
        _COUNTS.c.project,
        Campaign.owner,
        *_LIMITS,
        _total(_COUNTS.c.out).label("out"),
        _total(_COUNTS.c.queued).label("queued"),
        _total(_COUNTS.c.held).label("held"),
        _RESERVATION_ON.label("reservation"),
    )
    .join(Campaign, Campaign.id == _COUNTS.c.campaign_id)
    .outerjoin(Project, Project.name == _COUNTS.c.project)
    .group_by(_COUNTS.c.device_key, _COUNTS.c.project, Campaign.owner, *_LIMITS)
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
