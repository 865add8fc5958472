"""Jobs go home (orchestrator/homecoming.py): a job moved off its planned device returns
when that device is back, unless it started, failed there, or the device is not fit."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import insert, select, update

from farm_core import jobs
from farm_core.schema import (
    DISPATCHED,
    QUARANTINED,
    QUEUED,
    RUNNING,
    Attempt,
    Device,
    Job,
    utcnow,
)
from farm_core.settings import Timing
from orchestrator.homecoming import RETURNED, bring_back
from orchestrator.reconciler import reconcile
from orchestrator.submit import submit
from tests.support.farm import RecordingDispatcher, add_device, sqlite_engine, write_model

TIMING = Timing(dispatch_grace_s=0, offline_after_s=30, device_gone_s=300)


@pytest.fixture
def farm(tmp_path: Path):
    """A job planned on noop:a, moved to noop:b (the same hardware) while a was away."""
    engine = sqlite_engine(tmp_path)
    add_device(engine, "noop:a")
    add_device(engine, "noop:b")
    submit(engine, RecordingDispatcher(), [write_model(tmp_path / "m.tflite")], "kind=noop", "cpu")
    with engine.begin() as c:
        c.execute(update(Job).where(Job.id == 2).values(state="cancelled"))  # b's own
        c.execute(
            update(Job)
            .where(Job.id == 1)
            .values(state=QUEUED, attempt=2, device_key="noop:b", reason="device noop:a offline")
        )
    return engine


def job(engine):
    with engine.begin() as c:
        return c.execute(select(Job).where(Job.id == 1)).one()


def test_a_queued_job_returns_with_its_reason_and_an_attempt_row(farm) -> None:
    assert bring_back(farm, TIMING) == [1]
    j = job(farm)
    assert (j.state, j.attempt, j.device_key) == (QUEUED, 3, "noop:a")
    assert j.reason == "returned to noop:a, back online"
    with farm.begin() as c:
        a = c.execute(select(Attempt)).one()
    assert (a.attempt, a.device_key, a.outcome, a.reason) == (
        2, "noop:b", RETURNED, "returned to noop:a, back online"
    )  # fmt: skip


def test_a_dispatched_job_returns_and_the_reconciler_sends_it_home(farm) -> None:
    with farm.begin() as c:
        c.execute(update(Job).where(Job.id == 1).values(state=DISPATCHED, dispatched_at=utcnow()))
    d = RecordingDispatcher()
    reconcile(farm, d, lambda queues=None: {"df-job-1-2"}, TIMING)
    assert [(o.job_id, o.attempt, o.device_key) for o in d.sent] == [(1, 3, "noop:a")]
    assert (job(farm).state, job(farm).device_key) == (DISPATCHED, "noop:a")


def test_a_running_job_stays(farm) -> None:
    with farm.begin() as c:
        c.execute(update(Job).where(Job.id == 1).values(state=DISPATCHED))
        assert jobs.claim(c, 1, 2, "w", 60) is not None
    assert bring_back(farm, TIMING) == []
    assert (job(farm).state, job(farm).device_key) == (RUNNING, "noop:b")


@pytest.mark.parametrize(
    "away",
    [
        {"state": "offline"},
        {"last_seen": utcnow() - timedelta(seconds=60)},
        {"health": QUARANTINED},
    ],
    ids=["offline", "silent", "quarantined"],
)
def test_a_device_still_away_or_unfit_gets_nothing_back(farm, away) -> None:
    with farm.begin() as c:
        c.execute(update(Device).where(Device.key == "noop:a").values(**away))
    assert bring_back(farm, TIMING) == []
    assert job(farm).device_key == "noop:b"


def test_a_job_that_failed_on_its_planned_device_stays_where_it_is(farm) -> None:
    with farm.begin() as c:
        c.execute(
            insert(Attempt).values(
                job_id=1, attempt=1, device_key="noop:a", outcome="device_error", reason="x"
            )
        )
    assert bring_back(farm, TIMING) == []


def test_a_device_reserved_for_someone_else_gets_nothing_back(farm) -> None:
    from farm_core.schema import Reservation

    now = utcnow()
    with farm.begin() as c:
        c.execute(
            insert(Reservation).values(
                device_key="noop:a", user="eve", project="other",
                starts_at=now - timedelta(minutes=1), ends_at=now + timedelta(hours=1),
            )
        )  # fmt: skip
    assert bring_back(farm, TIMING) == []


def test_many_jobs_return_in_one_statement_and_one_insert(tmp_path) -> None:
    """754 jobs returned one by one (a read, an UPDATE and an INSERT each) took seconds of
    a fleet pass; now one UPDATE per state and attempt and one INSERT of their attempts."""
    from sqlalchemy import event

    engine = sqlite_engine(tmp_path)
    for key in ("noop:a", "noop:b"):
        add_device(engine, key)
    models = [write_model(tmp_path / f"m{i}.tflite", scale=1.0 + i) for i in range(40)]
    submit(engine, RecordingDispatcher(), models, "key=noop:a", "cpu")
    with engine.begin() as c:
        c.execute(update(Job).values(state=QUEUED, attempt=2, device_key="noop:b"))
    seen: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *a: seen.append(a[2]))
    assert bring_back(engine, TIMING) == list(range(1, 41))
    assert len([s for s in seen if s.startswith("UPDATE jobs")]) == 1
    assert len([s for s in seen if s.startswith("INSERT INTO attempts")]) == 1
    with engine.begin() as c:
        homes = set(c.execute(select(Job.device_key, Job.attempt, Job.reason)).all())
    assert homes == {("noop:a", 3, "returned to noop:a, back online")}
