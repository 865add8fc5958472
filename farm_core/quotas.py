"""Project quotas: concurrent jobs and device-minutes per UTC day (None: no limit).

A project with no row in `projects` has no limits. Concurrent jobs count the project's
dispatched and running jobs (a dispatched job holds its place in a device's queue).
Device-minutes count each job's started_at to finished_at (to now while it runs), within
the current UTC day. Submission refuses a campaign that can never run (a quota of zero) or
a project past today's minutes; dispatch keeps a project's jobs queued while it is at a
quota, with the reason (farm_core.holds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, func, insert, select, update

from delegate_runtime.errors import JobError

from .schema import DISPATCHED, QUEUED, RUNNING, TERMINAL_STATES, Job, Project, utcnow


@dataclass(frozen=True)
class Quota:
    """A project's limits; None: no limit."""

    project: str
    max_concurrent_jobs: int | None = None
    device_minutes_per_day: float | None = None

    def limited(self) -> bool:
        return self.max_concurrent_jobs is not None or self.device_minutes_per_day is not None


@dataclass(frozen=True)
class Active:
    """A project's dispatched and running jobs, and when the newest of them was sent."""

    jobs: int = 0
    last_sent: datetime | None = None


def day_start(now: datetime) -> datetime:
    """Midnight UTC of `now`'s day (the farm's timestamps are naive UTC)."""
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def load(conn: Connection, projects: list[str] | None = None) -> dict[str, Quota]:
    """The quotas of `projects` (all with a row when None); absent projects have none."""
    q = select(Project.name, Project.max_concurrent_jobs, Project.device_minutes_per_day)
    if projects is not None:
        if not projects:
            return {}
        q = q.where(Project.name.in_(projects))
    return {r.name: Quota(*r) for r in conn.execute(q)}


def active(conn: Connection, projects: list[str] | None = None) -> dict[str, Active]:
    """The dispatched and running jobs of `projects` (of every project when None), in one
    grouped query on the active jobs."""
    q = (
        select(Job.project, func.count(), func.max(Job.dispatched_at))
        .where(Job.state.in_((DISPATCHED, RUNNING)))
        .group_by(Job.project)
    )
    if projects is not None:
        q = q.where(Job.project.in_(projects))
    rows = conn.execute(q)
    return {p: Active(n, last) for p, n, last in rows}


def running(conn: Connection, project: str) -> int:
    """The project's running jobs."""
    return conn.execute(
        select(func.count()).where(Job.project == project, Job.state == RUNNING)
    ).scalar_one()


def minutes_today(conn: Connection, project: str, now: datetime) -> float:
    """Device-minutes the project's jobs used since midnight UTC: ended jobs from their
    started_at to finished_at, running ones to `now`, each clipped to today."""
    start = day_start(now)
    rows = conn.execute(
        select(Job.started_at, Job.finished_at, Job.state).where(
            Job.project == project,
            Job.started_at.is_not(None),
            (
                (Job.state == RUNNING)
                | (Job.state.in_(TERMINAL_STATES) & (Job.finished_at >= start))
            ),
        )
    )
    total_s = 0.0
    for began, ended, state in rows:
        end = now if state == RUNNING or ended is None else min(ended, now)
        total_s += max((end - max(began, start)).total_seconds(), 0.0)
    return total_s / 60.0


def concurrent_reason(quota: Quota, jobs: int) -> str:
    """Why one more job of the project may not start or be sent ('' when it may)."""
    cap = quota.max_concurrent_jobs
    if cap is not None and jobs >= cap:
        return f"project {quota.project} at its quota of {cap} concurrent jobs"
    return ""


def minutes_reason(quota: Quota, used: float) -> str:
    """Why the project may start nothing more today ('' when it may)."""
    cap = quota.device_minutes_per_day
    if cap is not None and used >= cap:
        return (
            f"project {quota.project} used {used:.1f} of its {cap:g} device-minutes for today "
            "(UTC); the quota resets at 00:00 UTC"
        )
    return ""


def submission_errors(conn: Connection, project: str, now: datetime | None = None) -> list[str]:
    """Why a campaign of `project` is refused now: a quota of zero (it could never run),
    or today's device-minutes used up."""
    now = now or utcnow()
    quota = load(conn, [project]).get(project)
    if quota is None:
        return []
    if quota.max_concurrent_jobs == 0:
        return [f"project {project} has a quota of 0 concurrent jobs: none of its jobs can run"]
    if quota.device_minutes_per_day == 0:
        return [f"project {project} has a quota of 0 device-minutes per day: none can run"]
    if quota.device_minutes_per_day is None:
        return []
    why = minutes_reason(quota, minutes_today(conn, project, now))
    return [why] if why else []


# -- the admin's side ---------------------------------------------------------------------


def _checked(name: str, max_jobs: int | None, minutes: float | None) -> None:
    from .accounts import NAME_RE  # projects are named as users are

    if not NAME_RE.fullmatch(name):
        raise JobError(f"project name {name[:70]!r}: letters, digits and ._@- (at most 64)")
    if max_jobs is not None and max_jobs < 0:
        raise JobError(f"--max-concurrent-jobs must be 0 or more, not {max_jobs}")
    if minutes is not None and (not math.isfinite(minutes) or minutes < 0):
        raise JobError(f"--device-minutes-per-day must be 0 or more, not {minutes}")


def add(
    conn: Connection,
    name: str,
    max_concurrent_jobs: int | None = None,
    device_minutes_per_day: float | None = None,
    now: datetime | None = None,
) -> Quota:
    """Create a project with its quotas; JobError when it exists or a value is bad."""
    _checked(name, max_concurrent_jobs, device_minutes_per_day)
    if conn.execute(select(Project.name).where(Project.name == name)).first() is not None:
        raise JobError(f"project {name} exists already (`devicefarm projects set` changes it)")
    conn.execute(
        insert(Project).values(
            name=name,
            max_concurrent_jobs=max_concurrent_jobs,
            device_minutes_per_day=device_minutes_per_day,
            created_at=now or utcnow(),
        )
    )
    return Quota(name, max_concurrent_jobs, device_minutes_per_day)


#: `set`'s value for "leave this quota as it is".
KEEP = object()


def change(
    conn: Connection,
    name: str,
    max_concurrent_jobs: int | None | object = KEEP,
    device_minutes_per_day: float | None | object = KEEP,
) -> Quota:
    """Change a project's quotas (None: no limit; KEEP: unchanged); JobError when unknown."""
    values = {
        k: v
        for k, v in (
            ("max_concurrent_jobs", max_concurrent_jobs),
            ("device_minutes_per_day", device_minutes_per_day),
        )
        if v is not KEEP
    }
    jobs, minutes = values.get("max_concurrent_jobs"), values.get("device_minutes_per_day")
    _checked(name, jobs, minutes)  # type: ignore[arg-type]
    if values:
        done = conn.execute(update(Project).where(Project.name == name).values(**values))
        if done.rowcount == 0:
            raise JobError(f"no project {name} (`devicefarm projects add` creates it)")
    quota = load(conn, [name]).get(name)
    if quota is None:
        raise JobError(f"no project {name} (`devicefarm projects add` creates it)")
    return quota


@dataclass(frozen=True)
class Usage:
    """A project's use now against its quotas."""

    quota: Quota
    concurrent: int
    minutes_today: float
    queued: int


def usage(conn: Connection, now: datetime | None = None) -> list[Usage]:
    """Every project with a row or with jobs: its active jobs, today's minutes, queued jobs."""
    now = now or utcnow()
    quotas = load(conn)
    act = active(conn)
    queued = dict(
        conn.execute(
            select(Job.project, func.count()).where(Job.state == QUEUED).group_by(Job.project)
        ).all()
    )
    names = sorted(set(quotas) | set(act) | set(queued))
    return [
        Usage(
            quotas.get(p, Quota(p)),
            act.get(p, Active()).jobs,
            minutes_today(conn, p, now),
            queued.get(p, 0),
        )
        for p in names
    ]
