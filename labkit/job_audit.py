"""A campaign's jobs audited from the database: lost, duplicated, stuck."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine, func, select

from farm_core.schema import SUCCEEDED, TERMINAL_STATES, Attempt, Job, Result


@dataclass
class Audit:
    """A no-op campaign's end, where every job should succeed once.

    lost: ended without its result (a state other than succeeded, or succeeded with no
    result for its last attempt); duplicated: more than one result; stuck: not ended;
    stray: a result for an attempt that is not the job's last."""

    jobs: int
    results: int
    lost: list[int]
    duplicated: list[int]
    stuck: list[int]
    stray: list[int]
    states: Counter
    retried: int  #: jobs that took more than one attempt
    #: why attempts ended before the last: outcome -> (count, first, last time)
    attempts: dict[str, tuple[int, datetime, datetime]]

    @property
    def clean(self) -> bool:
        return not (self.lost or self.duplicated or self.stuck or self.stray)


def audit(engine: Engine, campaign_id: int) -> Audit:
    with engine.begin() as conn:
        jobs = conn.execute(
            select(Job.id, Job.state, Job.attempt).where(Job.campaign_id == campaign_id)
        ).all()
        results = conn.execute(
            select(Result.job_id, Result.attempt).where(Result.campaign_id == campaign_id)
        ).all()
        ended = conn.execute(
            select(Attempt.outcome, func.count(), func.min(Attempt.at), func.max(Attempt.at))
            .join(Job, Job.id == Attempt.job_id)
            .where(Job.campaign_id == campaign_id)
            .group_by(Attempt.outcome)
        ).all()
    per_job = Counter(r.job_id for r in results)
    last = {j.id: j.attempt for j in jobs}
    has_last = {r.job_id for r in results if last.get(r.job_id) == r.attempt}
    return Audit(
        jobs=len(jobs),
        results=len(results),
        lost=sorted(
            j.id
            for j in jobs
            if j.state in TERMINAL_STATES and (j.state != SUCCEEDED or j.id not in has_last)
        ),
        duplicated=sorted(k for k, n in per_job.items() if n > 1),
        stuck=sorted(j.id for j in jobs if j.state not in TERMINAL_STATES),
        stray=sorted(r.job_id for r in results if last.get(r.job_id) != r.attempt),
        states=Counter(j.state for j in jobs),
        retried=sum(1 for j in jobs if j.attempt > 1),
        attempts={outcome: (n, first, last) for outcome, n, first, last in ended},
    )
