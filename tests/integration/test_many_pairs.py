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


def test_jobs_off_a_lost_device_are_placed_in_chunks_on_postgresql(pg_url: str, tmp_path) -> None:
    """510 dispatched jobs of a lost device onto two live ones: on PostgreSQL each chunk of
    500 is one UPDATE whose ids are one array (`= ANY`) and whose devices one JSON
    parameter (`->>`), each job written once, straight to its new device."""
    from sqlalchemy import event, func, select, update

    from farm_core.schema import DISPATCHED, QUEUED, Job
    from farm_core.settings import Timing
    from orchestrator.reconciler import reconcile
    from tests.support.farm import RecordingDispatcher, lost_device_farm

    engine = lost_device_farm(open_database(pg_url), tmp_path, 510, others=2)
    with engine.begin() as c:
        c.execute(
            update(Job).values(state=DISPATCHED, dispatched_at=utcnow() - timedelta(minutes=1))
        )
    seen: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *a: seen.append(a[2]))
    timing = Timing(dispatch_grace_s=0, offline_after_s=30, device_gone_s=300)
    report = reconcile(engine, RecordingDispatcher(), lambda: set(), timing, now=utcnow())
    moves = [s for s in seen if s.startswith("UPDATE jobs SET") and "lease_expires_at" in s]
    assert len(moves) == 2, [m[:80] for m in moves]
    assert all("= ANY (" in m and "->>" in m for m in moves)
    assert sorted(report.moved_off_lost_device) == list(range(1, 511))
    with engine.begin() as c:
        where = dict(c.execute(select(Job.device_key, func.count()).group_by(Job.device_key)).all())
        states = set(c.execute(select(Job.state, Job.attempt)).all())
    assert where == {"noop:o0": 255, "noop:o1": 255}
    assert states <= {(QUEUED, 2), (DISPATCHED, 2)}  # the fill may send some at once
    engine.dispose()
