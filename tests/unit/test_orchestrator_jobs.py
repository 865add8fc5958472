"""The job state machine: claims, leases, idempotent results, moves between devices."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select, update

from farm_core import jobs
from farm_core.schema import (
    CANCELLED,
    DISPATCHED,
    FAILED,
    QUEUED,
    RUNNING,
    SUCCEEDED,
    Attempt,
    Device,
    Job,
    Result,
    utcnow,
)
from farm_core.settings import MAX_FAILURES, Timing
from orchestrator.submit import submit
from tests.support.farm import RecordingDispatcher, add_device, sqlite_engine, write_model

TIMING = Timing()


@pytest.fixture
def farm(tmp_path: Path):
    engine = sqlite_engine(tmp_path)
    add_device(engine, "noop:a")
    add_device(engine, "noop:b")
    sub = submit(
        engine, RecordingDispatcher(), [write_model(tmp_path / "m.tflite")], "key=noop:a", "cpu"
    )
    with engine.begin() as conn:
        job_id = conn.execute(select(Job.id)).scalar_one()
    # widen the campaign's selector so that a second matching device exists
    from farm_core.schema import Campaign

    with engine.begin() as conn:
        conn.execute(
            update(Campaign).where(Campaign.id == sub.campaign_id).values(selector="kind=noop")
        )
    return engine, job_id


def test_claim_once_per_attempt(farm) -> None:
    engine, job = farm
    with engine.begin() as c:
        assert jobs.claim(c, job, 1, "w1", 60) is not None
    with engine.begin() as c:  # another worker with the same message: stale
        assert jobs.claim(c, job, 1, "w2", 60) is None
    with engine.begin() as c:  # an old attempt number: stale
        assert jobs.claim(c, job, 0, "w1", 60) is None


def test_result_is_written_once(farm) -> None:
    engine, job = farm
    with engine.begin() as c:
        jobs.claim(c, job, 1, "w1", 60)
    with engine.begin() as c:
        assert jobs.finish(c, job, 1, "w1", SUCCEEDED, {"avg_us": 5.0})
    with engine.begin() as c:  # a redelivered message finishing again
        assert not jobs.finish(c, job, 1, "w1", SUCCEEDED, {"avg_us": 6.0})
        assert jobs.claim(c, job, 1, "w1", 60) is None
    with engine.begin() as c:
        assert c.execute(select(func.count()).select_from(Result)).scalar() == 1
        assert c.execute(select(Job.state)).scalar() == SUCCEEDED


def test_same_worker_redelivery_restarts_and_counts_a_failure(farm) -> None:
    engine, job = farm
    with engine.begin() as c:
        jobs.claim(c, job, 1, "w1", 60)
    with engine.begin() as c:  # the pool child died; the message came back to w1
        again = jobs.claim(c, job, 1, "w1", 60)
    assert again is not None
    with engine.begin() as c:
        assert c.execute(select(Job.failures)).scalar() == 1


def test_expired_lease_lets_another_worker_claim(farm) -> None:
    engine, job = farm
    with engine.begin() as c:
        jobs.claim(c, job, 1, "w1", 60, now=utcnow() - timedelta(seconds=120))
    with engine.begin() as c:
        assert jobs.claim(c, job, 1, "w2", 60) is not None


def test_renew_lease_only_for_the_owner(farm) -> None:
    engine, job = farm
    with engine.begin() as c:
        jobs.claim(c, job, 1, "w1", 60)
    with engine.begin() as c:
        assert jobs.renew_lease(c, job, 1, "w1", 60)
        assert not jobs.renew_lease(c, job, 1, "w2", 60)


def test_place_prefers_another_device_and_bumps_the_attempt(farm) -> None:
    engine, job = farm
    with engine.begin() as c:
        jobs.claim(c, job, 1, "w1", 60)
    with engine.begin() as c:
        order = jobs.place(
            c,
            job,
            TIMING,
            expect_state=RUNNING,
            expect_attempt=1,
            outcome="device_error",
            reason="boom",
            count_failure=True,
            prefer_other=True,
        )
    assert order is not None and order.device_key == "noop:b" and order.attempt == 2
    assert order.countdown_s > 0
    with engine.begin() as c:
        row = c.execute(select(Job.state, Job.attempt, Job.failures, Job.planned_device)).one()
        assert tuple(row) == (QUEUED, 2, 1, "noop:a")
        assert c.execute(select(Attempt.outcome)).scalar() == "device_error"
        jobs.mark_sent(c, [order])
        assert c.execute(select(Job.state)).scalar() == DISPATCHED
    with engine.begin() as c:  # the first message is now stale
        assert jobs.claim(c, job, 1, "w1", 60) is None


def test_gives_up_after_max_failures(farm) -> None:
    engine, job = farm
    with engine.begin() as c:
        c.execute(update(Job).values(state=RUNNING, failures=MAX_FAILURES - 1))
        assert (
            jobs.place(
                c,
                job,
                TIMING,
                expect_state=RUNNING,
                expect_attempt=1,
                outcome="device_error",
                reason="boom",
                count_failure=True,
            )
            is None
        )
        state, reason = c.execute(select(Job.state, Job.reason)).one()
    assert state == FAILED and "gave up after 3" in reason


def test_no_eligible_device_leaves_it_waiting(farm) -> None:
    engine, job = farm
    with engine.begin() as c:
        c.execute(update(Device).values(last_seen=utcnow() - timedelta(hours=1)))
        assert (
            jobs.place(
                c,
                job,
                TIMING,
                expect_state=DISPATCHED,
                expect_attempt=1,
                outcome="device_lost",
                reason="gone",
            )
            is None
        )
        state, reason = c.execute(select(Job.state, Job.reason)).one()
    assert state == QUEUED and "waiting for a matching device" in reason


def test_cancel_makes_late_results_vanish(farm) -> None:
    engine, job = farm
    with engine.begin() as c:
        jobs.claim(c, job, 1, "w1", 60)
    with engine.begin() as c:
        assert jobs.cancel(c, campaign_id=1) == 1
    with engine.begin() as c:
        assert not jobs.finish(c, job, 1, "w1", SUCCEEDED, {})
        assert c.execute(select(Job.state)).scalar() == CANCELLED


@pytest.fixture
def gpu_farm(tmp_path: Path):
    """A gpu-fp16 job planned on an OpenCL GPU; the selector also matches a no-op device."""
    engine = sqlite_engine(tmp_path)
    gpu = {"kind": "opencl", "vendor": "pocl", "renderer": "gpu-x"}
    add_device(engine, "opencl:pocl:gpu_x", **gpu)
    add_device(engine, "opencl:pocl:gpu_x:1", **gpu)
    add_device(engine, "noop:n")
    submit(
        engine,
        RecordingDispatcher(),
        [write_model(tmp_path / "m.tflite")],
        "key=opencl:pocl:gpu_x",
        "gpu-fp16",
    )
    from farm_core.schema import Campaign

    with engine.begin() as conn:
        conn.execute(
            update(Campaign).values(selector="key=opencl:pocl:gpu_x|opencl:pocl:gpu_x:1|noop:n")
        )
        conn.execute(update(Job).values(state=RUNNING, worker="w1"))
    return engine


def _retry(engine):
    with engine.begin() as c:
        job = c.execute(select(Job.id, Job.attempt)).one()
        return jobs.place(
            c,
            job.id,
            TIMING,
            expect_state=RUNNING,
            expect_attempt=job.attempt,
            outcome="device_error",
            reason="boom",
            count_failure=True,
            prefer_other=True,
        )


def test_retry_never_lands_on_other_hardware(gpu_farm) -> None:
    """Issue 16 point 6: a gpu-fp16 retry 'succeeded' on a no-op device in 0.001 ms."""
    with gpu_farm.begin() as c:  # its twin GPU is away: only the no-op device matches
        c.execute(
            update(Device).where(Device.key == "opencl:pocl:gpu_x:1").values(health="quarantined")
        )
    order = _retry(gpu_farm)
    assert order is None or order.device_key == "opencl:pocl:gpu_x"
    with gpu_farm.begin() as c:
        assert c.execute(select(Job.device_key)).scalar() != "noop:n"


def test_retry_moves_to_the_same_hardware(gpu_farm) -> None:
    order = _retry(gpu_farm)
    assert order is not None and order.device_key == "opencl:pocl:gpu_x:1"


def test_take_many_takes_only_queued_jobs_at_their_current_attempt(tmp_path: Path) -> None:
    from tests.support.projects import queued_campaign

    engine = sqlite_engine(tmp_path)
    add_device(engine, "noop:a")
    queued_campaign(engine, tmp_path / "m", "team", 4, "key=noop:a")  # jobs 1-4, queued
    with engine.begin() as c:
        c.execute(update(Job).where(Job.id == 1).values(reason="waiting: a quota"))
        c.execute(update(Job).where(Job.id == 2).values(reason="kept"))
        c.execute(update(Job).where(Job.id == 3).values(attempt=2))  # its message is stale
        c.execute(update(Job).where(Job.id == 4).values(state=CANCELLED))
        taken = jobs.take_many(c, [(1, 1), (2, 1), (3, 1), (4, 1)], utcnow())
        rows = c.execute(select(Job.id, Job.state, Job.reason).order_by(Job.id)).all()
    assert taken == {(1, 1), (2, 1)}
    assert [tuple(r) for r in rows] == [
        (1, DISPATCHED, ""),  # a held job that goes loses its reason
        (2, DISPATCHED, "kept"),
        (3, QUEUED, ""),
        (4, CANCELLED, ""),
    ]
