"""Whether the reconciler's "message lost" calls in a campaign were right.

An attempt the reconciler called lost (outcome `message_lost`) was called wrongly when its
message existed all the same: it reached a device later, which refused it as stale (an
agent's log line `Task devicefarm.run_job[df-job-J-A] succeeded in ...: 'stale'`), or it is
still in Redis at the end (a queue's list or the unacked hash). A message that did neither
was gone from the broker.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine, select

from farm_core.schema import Attempt, Job
from orchestrator.lost_messages import OUTCOME
from orchestrator.probes import RedisProbe

_STALE = re.compile(r"run_job\[df-job-(\d+)-(\d+)\] succeeded in [\d.]+s: 'stale'")
#: farm_core.celery_app.task_id's form
_TASK_ID = re.compile(r"df-job-(\d+)-(\d+)")


@dataclass
class LostCalls:
    called: int  #: attempts called lost
    arrived_later: list[tuple[int, int]]  #: (job, attempt) refused as stale afterwards
    still_in_broker: list[tuple[int, int]]

    @property
    def wrong(self) -> int:
        return len(set(self.arrived_later) | set(self.still_in_broker))


def stale_deliveries(logs: Iterable[Path]) -> set[tuple[int, int]]:
    """(job, attempt) of every delivery the agents refused as stale."""
    seen: set[tuple[int, int]] = set()
    for log in logs:
        for m in _STALE.finditer(log.read_text(errors="replace")):
            seen.add((int(m[1]), int(m[2])))
    return seen


def in_broker(broker_url: str) -> set[tuple[int, int]]:
    """(job, attempt) of every job message still in Redis: queued or unacknowledged (the
    reconciler's own full probe)."""
    ids = RedisProbe(broker_url)()
    if ids is None:
        raise RuntimeError(f"the broker {broker_url} cannot be read")
    return {(int(m[1]), int(m[2])) for m in map(_TASK_ID.fullmatch, ids) if m is not None}


def judge(
    engine: Engine, campaign_id: int, stale: set[tuple[int, int]], left: set[tuple[int, int]]
) -> LostCalls:
    with engine.begin() as conn:
        called = {
            (job_id, attempt)
            for job_id, attempt in conn.execute(
                select(Attempt.job_id, Attempt.attempt)
                .join(Job, Job.id == Attempt.job_id)
                .where(Job.campaign_id == campaign_id, Attempt.outcome == OUTCOME)
            )
        }
    return LostCalls(len(called), sorted(called & stale), sorted(called & left))
