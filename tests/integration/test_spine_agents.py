"""Two worker agents with different device sets serve one campaign; quarantine at start."""

from __future__ import annotations

import pytest

from farm_core.schema import SUCCEEDED
from orchestrator.submit import SubmissionError

pytestmark = pytest.mark.integration


def test_two_agents_split_a_campaign_by_device(farm, start_agent, models) -> None:
    a = start_agent("A", ["noop:a1?tags=lab", "noop:a2"], farm.db_url, farm.broker_url)
    b = start_agent("B", ["noop:b1?tags=lab"], farm.db_url, farm.broker_url)
    sub = farm.submit(models(2), "kind=noop", "cpu,gpu-fp32")
    assert sub.jobs == 2 * 3 * 2 and sub.sent == sub.jobs
    jobs = farm.wait_done(sub.campaign_id)
    assert {j.state for j in jobs} == {SUCCEEDED}
    results = farm.results(sub.campaign_id)
    assert len(results) == len(jobs)  # one result per job
    for r in results:  # each job ran on its planned device, served by that device's agent
        agent = a if r.device_key in a.keys else b
        assert r.device_key in agent.keys and r.device_facts["key"] == r.device_key
    # a selector by tag picks devices across both agents
    sub2 = farm.submit(models(1), "tag=lab", "cpu")
    assert sorted({j.device_key for j in farm.wait_done(sub2.campaign_id)}) == [
        "noop:a1",
        "noop:b1",
    ]


def test_device_failing_its_canary_is_quarantined_and_gets_no_jobs(
    farm, start_agent, models
) -> None:
    start_agent(
        "Q",
        ["noop:sick?canary=fail", "noop:well"],
        farm.db_url,
        farm.broker_url,
        ready=["noop:well"],
    )
    with pytest.raises(SubmissionError, match="only offline or quarantined"):
        farm.submit(models(1), "key=noop:sick")
    sub = farm.submit(models(1), "kind=noop")
    assert sub.devices == ["noop:well"]
    assert any("noop:sick: quarantined (canary failed" in w for w in sub.warnings)
    assert {j.state for j in farm.wait_done(sub.campaign_id)} == {SUCCEEDED}
