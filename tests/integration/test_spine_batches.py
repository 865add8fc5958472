"""Short jobs in batches (worker_agent.batches) through the real spine: Redis, PostgreSQL and
`devicefarm worker` processes, a Celery consumer per device and a device group; every job
once, and batches seen where the jobs were short."""

from __future__ import annotations

from collections import Counter

import pytest

from farm_core.schema import SUCCEEDED

pytestmark = pytest.mark.integration

DEVICES = ["noop:q1?tags=quick", "noop:q2?tags=quick"]


def claimed_together(jobs: list) -> int:
    """Jobs claimed in one statement with another (a batch's share one `started_at`)."""
    starts = Counter((j.device_key, j.started_at) for j in jobs)
    return sum(n for n in starts.values() if n > 1)


def exactly_once(farm, campaign_id: int) -> list:
    jobs = farm.jobs(campaign_id)
    assert Counter(j.state for j in jobs) == {SUCCEEDED: len(jobs)}
    per_job = Counter(r.job_id for r in farm.results(campaign_id))
    assert sorted(per_job) == sorted(j.id for j in jobs)
    assert set(per_job.values()) == {1}
    return jobs


@pytest.mark.parametrize("group", ["0", "2"], ids=["a consumer per device", "a device group"])
def test_short_jobs_run_in_batches_exactly_once(
    farm, start_agent, models, monkeypatch, group: str
) -> None:
    monkeypatch.setenv("DEVICEFARM_GROUP_DEVICES", group)
    start_agent("Q", DEVICES, farm.db_url, farm.broker_url)
    sub = farm.submit(models(40), "tag=quick", "cpu")
    assert sub.jobs == 80
    jobs = exactly_once(farm, farm.wait_done(sub.campaign_id, timeout_s=90)[0].campaign_id)
    assert claimed_together(jobs) >= 40, "no batches: every job claimed alone"


def test_jobs_that_are_not_short_are_never_batched(farm, start_agent, models, monkeypatch) -> None:
    monkeypatch.setenv("DEVICEFARM_BATCH_BELOW_MS", "5")
    start_agent("S", [f"{d}&delay_s=0.02" for d in DEVICES], farm.db_url, farm.broker_url)
    sub = farm.submit(models(12), "tag=quick", "cpu")
    jobs = exactly_once(farm, farm.wait_done(sub.campaign_id, timeout_s=90)[0].campaign_id)
    assert claimed_together(jobs) == 0
