"""Failures the spine survives: a worker killed mid-job, Redis restarted empty, a device
that stops heartbeating. The database is the truth; the reconciler repairs the rest."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from farm_core.schema import SUCCEEDED, TIMED_OUT, Attempt, Device, Job
from tests.support.farm import wait_until

pytestmark = pytest.mark.integration


def running_on(farm, campaign_id: int, key: str):
    return [j for j in farm.jobs(campaign_id) if j.state == "running" and j.device_key == key]


def test_worker_killed_mid_job_finishes_elsewhere_with_one_result(
    farm, start_agent, models
) -> None:
    slow = start_agent("slow", ["noop:slow?delay_s=30&tags=pool"], farm.db_url, farm.broker_url)
    start_agent("fast", ["noop:fast?tags=pool"], farm.db_url, farm.broker_url)
    sub = farm.submit(models(1), "tag=pool", "cpu")
    (victim,) = wait_until(
        lambda: running_on(farm, sub.campaign_id, "noop:slow"),
        30,
        "the slow device to start its job",
    )
    slow.kill()  # agent, consumer and pool child: SIGKILL, no ack, no goodbye
    jobs = farm.wait_done(sub.campaign_id, timeout_s=60)
    assert {j.state for j in jobs} == {SUCCEEDED}
    moved = next(j for j in jobs if j.id == victim.id)
    assert (moved.planned_device, moved.device_key) == ("noop:slow", "noop:fast")
    assert moved.attempt == 2 and moved.failures == 1
    results = farm.results(sub.campaign_id)
    assert [r.job_id for r in results].count(victim.id) == 1
    assert len(results) == len(jobs)
    with farm.engine.begin() as conn:
        outcome, reason = conn.execute(
            select(Attempt.outcome, Attempt.reason).where(Attempt.job_id == victim.id)
        ).one()
    assert outcome == "lease_expired" and "noop:slow" in reason


def test_redis_restarted_without_persistence_loses_nothing(
    farm, start_agent, models, redis_server
) -> None:
    start_agent("R", ["noop:r?delay_s=0.3"], farm.db_url, farm.broker_url)
    sub = farm.submit(models(4), "key=noop:r", "cpu,gpu-fp32,gpu-fp16")
    assert sub.jobs == 12
    wait_until(
        lambda: any(j.state == SUCCEEDED for j in farm.jobs(sub.campaign_id)),
        30,
        "a first job to finish",
    )
    redis_server.restart()  # every queued and unacked message is gone
    jobs = farm.wait_done(sub.campaign_id, timeout_s=90)
    assert {j.state for j in jobs} == {SUCCEEDED}
    assert any(j.attempt > 1 for j in jobs)  # some were sent again
    results = farm.results(sub.campaign_id)
    assert sorted(r.job_id for r in results) == [j.id for j in jobs]  # one each
    with farm.engine.begin() as conn:
        outcomes = set(conn.execute(select(Attempt.outcome)).scalars())
    assert "message_lost" in outcomes


def test_device_that_stops_heartbeating_goes_offline_and_its_jobs_expire(
    farm, start_agent, models
) -> None:
    agent = start_agent("H", ["noop:h?delay_s=20"], farm.db_url, farm.broker_url)
    sub = farm.submit(models(1), "key=noop:h", "cpu,gpu-fp32")
    wait_until(lambda: running_on(farm, sub.campaign_id, "noop:h"), 30, "a job to start")
    agent.kill()
    jobs = farm.wait_done(sub.campaign_id, timeout_s=60)
    assert [j.state for j in jobs] == [TIMED_OUT, TIMED_OUT]
    for j in jobs:
        assert "noop:h" in j.reason and "expired after waiting" in j.reason
    assert any("no heartbeat since" in j.reason for j in jobs)
    with farm.engine.begin() as conn:
        assert conn.execute(select(Device.state).where(Device.key == "noop:h")).scalar() == (
            "offline"
        )
        assert conn.execute(select(Job.id).where(Job.state == "running")).first() is None
