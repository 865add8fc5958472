"""Statements over thousands of (job id, attempt) pairs on PostgreSQL (farm_core.pair_chunks).

A 1,000-device campaign's first fill takes 8,000 jobs at once; in one `(id, attempt) IN`
list PostgreSQL's planner ran out of stack ("stack depth limit exceeded") and the whole
submission failed."""

from __future__ import annotations

from datetime import timedelta

import pytest

from farm_core import jobs
from farm_core.database import open_database
from farm_core.schema import utcnow

pytestmark = pytest.mark.integration


def test_taking_eight_thousand_jobs_at_once_is_planned(pg_url: str) -> None:
    engine = open_database(pg_url)
    pairs = [(job_id, 1) for job_id in range(1, 8001)]  # none queued: nothing is taken
    with engine.begin() as conn:
        assert jobs.take_many(conn, pairs, utcnow()) == set()
    engine.dispose()


def test_jobs_off_a_lost_device_are_placed_in_chunks_on_postgresql(
    pg_url: str, tmp_path, monkeypatch
) -> None:
    """510 dispatched jobs of a lost device onto two live ones, in one part: on PostgreSQL
    each chunk of 500 is one UPDATE whose ids are one array (`= ANY`) and whose devices one
    JSON parameter (`->>`), each job written once, straight to its new device; each job's
    attempt noted in one INSERT from arrays."""
    from sqlalchemy import event, func, select, update

    from farm_core.schema import DISPATCHED, QUEUED, Attempt, Job
    from farm_core.settings import Timing
    from orchestrator import reconciler
    from orchestrator.reconciler import reconcile
    from tests.support.farm import RecordingDispatcher, lost_device_farm

    monkeypatch.setattr(reconciler, "OFF_LOST_PART", 1000)

    engine = lost_device_farm(open_database(pg_url), tmp_path, 510, others=2)
    with engine.begin() as c:
        c.execute(
            update(Job).values(state=DISPATCHED, dispatched_at=utcnow() - timedelta(minutes=1))
        )
    seen: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *a: seen.append(a[2]))
    timing = Timing(dispatch_grace_s=0, offline_after_s=30, device_gone_s=300, pass_budget_s=60)
    report = reconcile(
        engine, RecordingDispatcher(), lambda queues=None: set(), timing, now=utcnow()
    )
    moves = [s for s in seen if s.startswith("UPDATE jobs SET") and "lease_expires_at" in s]
    assert len(moves) == 2, [m[:80] for m in moves]
    assert all("= ANY (" in m and "->>" in m for m in moves)
    assert len([s for s in seen if s.startswith("INSERT INTO attempts")]) == 1
    assert sorted(report.moved_off_lost_device) == list(range(1, 511))
    with engine.begin() as c:
        where = dict(c.execute(select(Job.device_key, func.count()).group_by(Job.device_key)).all())
        states = set(c.execute(select(Job.state, Job.attempt)).all())
        noted = c.execute(
            select(Attempt.attempt, Attempt.outcome, func.count()).group_by(
                Attempt.attempt, Attempt.outcome
            )
        ).all()
    assert noted == [(1, "device_lost", 510)]
    assert where == {"noop:o0": 255, "noop:o1": 255}
    assert states <= {(QUEUED, 2), (DISPATCHED, 2)}  # the fill may send some at once
    engine.dispose()


def test_attempts_already_noted_are_skipped_on_postgresql(pg_url: str, tmp_path) -> None:
    """record_attempts' INSERT from arrays notes each (job, attempt) once: one noted before
    (by the worker, say) and one twice in the same call are skipped, not an error; the
    reasons, several shared, each stored whole."""
    from sqlalchemy import select

    from farm_core.schema import Attempt
    from tests.support.farm import lost_device_farm

    engine = lost_device_farm(open_database(pg_url), tmp_path, 3, others=1)
    now = utcnow()

    def entry(job_id: int, attempt: int, reason: str) -> dict:
        return {
            "job_id": job_id,
            "attempt": attempt,
            "device_key": "noop:lost",
            "worker": "",
            "outcome": "device_lost",
            "reason": reason,
        }

    with engine.begin() as c:
        jobs.record_attempts(c, [entry(1, 1, "first")], now)
        jobs.record_attempts(
            c,
            [entry(1, 1, "again"), entry(2, 1, "gone: it's\x00 silent"), entry(3, 1, "gone")]
            + [entry(3, 1, "twice"), entry(2, 2, "gone: it's\x00 silent")],
            now,
        )
        noted = c.execute(
            select(Attempt.job_id, Attempt.attempt, Attempt.reason).order_by(Attempt.id)
        ).all()
    assert noted == [
        (1, 1, "first"),
        (2, 1, "gone: it's\\x00 silent"),
        (3, 1, "gone"),
        (2, 2, "gone: it's\\x00 silent"),
    ]
    engine.dispose()
