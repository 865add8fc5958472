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

from farm_core.celery_app import QUEUE_PREFIX
from farm_core.schema import Attempt, Job
from orchestrator.lost_messages import OUTCOME

_STALE = re.compile(r"run_job\[df-job-(\d+)-(\d+)\] succeeded in [\d.]+s: 'stale'")
_TASK_ID = re.compile(r'"id": "df-job-(\d+)-(\d+)"')
#: kombu's hash of deliveries not yet acknowledged.
UNACKED = "unacked"


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


def in_broker(client) -> set[tuple[int, int]]:  # type: ignore[no-untyped-def]
    """(job, attempt) of every job message still in Redis: queued or unacknowledged."""
    seen: set[tuple[int, int]] = set()
    raw: list[bytes] = []
    for key in client.scan_iter(match=QUEUE_PREFIX + "*", count=1000):
        if client.type(key) == b"list":
            raw.extend(client.lrange(key, 0, -1))
    raw.extend(client.hvals(UNACKED) if client.type(UNACKED) == b"hash" else [])
    for item in raw:  # an unacked entry is [message, exchange, routing key]
        m = _TASK_ID.search(item.decode(errors="replace"))
        if m is not None:
            seen.add((int(m[1]), int(m[2])))
    return seen


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
