"""Dispatched jobs whose message the broker no longer holds (for `lost_confirm_s`), queued
again in sets.

The job stays on its device as a new attempt (its old message, should it turn up late, is
stale at its claim); the device's fill at the end of the reconciler's pass sends it. One
UPDATE per attempt number and one INSERT of attempt records per pass, whatever the count:
a pass that found 4,916 such jobs placed them one transaction each, for 233 s."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection

from farm_core import jobs
from farm_core.celery_app import queue_for, task_id
from farm_core.schema import DISPATCHED

OUTCOME = "message_lost"


def reason(attempt: int) -> str:
    return f"message for attempt {attempt} was no longer in the broker"


def confirmed(
    probe: Any,
    candidates: Sequence[Any],
    now: datetime,
    confirm_s: float,
    looked: Sequence[str] | None = None,
) -> list[Any]:
    """The `candidates` (reconciler rows the probe did not see, on the devices the pass
    looked at: `looked`, None for every one) the broker has lacked in every probe for
    `confirm_s` (the probe's `missing_since`: a consumer may hold a message Redis popped
    for it, unread, in no list and not yet in the unacked hash), and that the probe's
    snapshot of their queues lacks too (probes.RedisProbe.recheck: read only for those
    due, as a scan may miss a message that moved meanwhile); none when the broker cannot
    be read now (decided next pass). A probe with no memory or snapshot decides on what it
    lacks now. What the pass did not look at is kept for the pass that does, but no longer
    than ten confirmations (its device gone, the job moved)."""
    due = list(candidates)
    since = getattr(probe, "missing_since", None)
    if since is not None:
        missing = {task_id(j.id, j.attempt): j for j in candidates}
        devices = None if looked is None else set(looked)
        forget_before = now - timedelta(seconds=10 * confirm_s)
        for tid in since.keys() - missing.keys():
            first, device = since[tid]
            if devices is None or device in devices or first < forget_before:
                del since[tid]  # found, or moved on
        due = [
            j
            for tid, j in missing.items()
            if (now - since.setdefault(tid, (now, j.device_key))[0]).total_seconds() >= confirm_s
        ]
    recheck = getattr(probe, "recheck", None)
    if recheck is None or not due:
        return due
    seen = recheck(sorted({queue_for(j.device_key) for j in due}))
    if seen is None:
        return []
    for tid in seen & (since.keys() if since is not None else set()):
        del since[tid]  # there after all: missed by the scan
    return [j for j in due if task_id(j.id, j.attempt) not in seen]


def requeue(conn: Connection, lost: Sequence[Any], now: datetime) -> list[int]:
    """Queue `lost` (reconciler rows: id, attempt, device_key, worker) again as their next
    attempt, each still dispatched at the attempt it was read at; returns the ids moved."""
    held = {(j.id, j.attempt): (j.device_key, j.worker or "") for j in lost}
    return jobs.back_to_queue(conn, held, DISPATCHED, OUTCOME, reason, now)
