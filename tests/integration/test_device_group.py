"""Device groups (issue 44): one process serving many no-op devices (worker_agent.group),
against real Redis, PostgreSQL and `devicefarm worker` processes.

Each test starts its agent with DEVICEFARM_GROUP_DEVICES set, so every no-op device is
served by a group process; the default (a consumer process per device) is what the rest of
the integration tier runs.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.support.farm import RedisServer, free_port, wait_until, write_model

pytestmark = pytest.mark.integration

#: Devices per group process in these tests.
GROUP = "50"


@pytest.fixture
def grouped(monkeypatch) -> None:
    """Agents started from now on serve their no-op devices in groups."""
    monkeypatch.setenv("DEVICEFARM_GROUP_DEVICES", GROUP)


def processes_of(pgid: int) -> list[str]:
    """The command lines of every process in process group `pgid` (an agent's session)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                out.append((stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except (OSError, IndexError, ValueError):
            continue
    return out


def exactly_once(farm, campaign_id: int) -> list:
    """Every job succeeded, with one result each, for its last attempt."""
    jobs = farm.jobs(campaign_id)
    results = farm.results(campaign_id)
    assert {j.state for j in jobs} == {"succeeded"}, Counter(j.state for j in jobs)
    per_job = Counter(r.job_id for r in results)
    assert sorted(per_job) == [j.id for j in jobs]
    assert set(per_job.values()) == {1}, "a job has more than one result"
    last = {j.id: j.attempt for j in jobs}
    assert all(r.attempt == last[r.job_id] for r in results)
    return jobs


def test_a_group_runs_a_campaign_on_many_devices_exactly_once_in_two_processes(
    farm, start_agent, models, grouped
) -> None:
    """40 no-op devices, 120 jobs: every job once; the agent is 2 processes, not 81."""
    devices = [f"noop:g{i:02d}?delay_s=0.05&tags=grp" for i in range(40)]
    agent = start_agent("G", devices, farm.db_url, farm.broker_url)
    procs = processes_of(agent.proc.pid)
    assert len(procs) == 2, procs  # the agent and one group process
    assert sum("worker_agent.group" in p for p in procs) == 1
    sub = farm.submit(models(3), "tag=grp", "cpu")
    assert sub.jobs == 120
    farm.wait_done(sub.campaign_id, timeout_s=90)
    jobs = exactly_once(farm, sub.campaign_id)
    assert len({j.device_key for j in jobs}) == 40  # every device ran its own
    assert len(processes_of(agent.proc.pid)) == 2  # no process per job or device


def test_one_devices_quarantine_does_not_stop_the_others(
    farm, start_agent, models, grouped
) -> None:
    """A device whose every job fails for its own reasons is quarantined (failure streak)
    and paused in its group; its jobs move (retries with a backoff: eta messages) and the
    other devices of the group run everything."""
    from farm_core.schema import QUARANTINED

    good = [f"noop:q{i}?delay_s=0.1&tags=quar" for i in range(4)]
    bad = "noop:qbad?error=device&tags=quar"
    agent = start_agent("Q", [*good, bad], farm.db_url, farm.broker_url)
    sub = farm.submit(models(8), "tag=quar", "cpu")
    text = lambda: agent.log.read_text()  # noqa: E731
    wait_until(lambda: "noop:qbad paused" in text(), 60, "the bad device to be paused")
    done_then = sum(j.state == "succeeded" for j in farm.jobs(sub.campaign_id))
    farm.wait_done(sub.campaign_id, timeout_s=120)
    jobs = exactly_once(farm, sub.campaign_id)
    assert done_then < len(jobs)  # the others went on after the pause
    assert "noop:qbad" not in {j.device_key for j in jobs}
    with farm.engine.begin() as conn:
        from sqlalchemy import select

        from farm_core.schema import Attempt, Device

        health = dict(conn.execute(select(Device.key, Device.health)).all())
        moved = conn.execute(select(Attempt.job_id).where(Attempt.device_key == "noop:qbad")).all()
    assert moved, "the bad device's jobs were moved"
    assert all(health[k.split("?")[0]] != QUARANTINED for k in good)


@pytest.fixture(params=[False, True], ids=["redis-empty", "redis-persistent"])
def restartable_redis(request, tmp_path):
    server = RedisServer(free_port(), tmp_path, persistent=request.param)
    server.start()
    yield server
    server.stop()


def test_a_broker_restart_mid_campaign_loses_and_duplicates_nothing(
    pg_url, restartable_redis, fast_timing, start_agent, models, grouped
) -> None:
    """Redis goes away while the group's jobs run (their acks fail) and comes back empty or
    with its data: the group reconnects, every device consumes again, and every job ends
    once (the reconciler re-sends what Redis lost)."""
    from tests.integration.conftest import Farm

    farm = Farm(pg_url, restartable_redis.url)
    try:
        devices = [f"noop:r{i}?delay_s=1&tags=rst" for i in range(6)]
        agent = start_agent("R", devices, farm.db_url, farm.broker_url)
        sub = farm.submit(models(5), "tag=rst", "cpu")
        wait_until(
            lambda: sum(j.state == "running" for j in farm.jobs(sub.campaign_id)) >= 4,
            30,
            "the devices to run jobs",
        )
        restartable_redis.stop()
        time.sleep(4.0)  # longer than a job: their acks fail
        restartable_redis.start()
        farm.wait_done(sub.campaign_id, timeout_s=90)
        exactly_once(farm, sub.campaign_id)
        assert "broker connection lost" in agent.log.read_text()
    finally:
        farm.close()


def test_a_job_past_its_time_limit_ends_timed_out_and_the_device_goes_on(
    farm, start_agent, models, grouped
) -> None:
    """The soft limit (`--timeout`) raises in the job's thread: the job ends timed out in
    about the limit, not the job's length, and the device runs its next job."""
    from orchestrator.submit import RunSettings

    start_agent("T", ["noop:slow?delay_s=6"], farm.db_url, farm.broker_url)
    two = models(2)
    started = time.monotonic()
    limited = RunSettings(num_runs=100, diff_runs=0, timeout_s=1)  # 100 steps of 0.06 s
    sub = farm.submit(two[:1], "key=noop:slow", "cpu", settings=limited)
    (job,) = farm.wait_done(sub.campaign_id, timeout_s=30)
    assert job.state == "timed_out", job.reason
    assert "soft time limit" in job.reason
    assert time.monotonic() - started < 5.5  # not the job's 6 s
    after = farm.submit(two[1:], "key=noop:slow", "cpu", settings=RunSettings(diff_runs=0))
    assert [j.state for j in farm.wait_done(after.campaign_id, timeout_s=60)] == ["succeeded"]


def test_cancelling_a_running_job_frees_its_device(farm, start_agent, models, grouped) -> None:
    """A cancelled job is aborted in its thread at the next lease renewal (JobLost raised
    there), its device free long before the job's 20 s."""
    from farm_core import jobs
    from farm_core.schema import CANCELLED
    from orchestrator.submit import RunSettings

    agent = start_agent("C", ["noop:c?delay_s=20"], farm.db_url, farm.broker_url)
    sub = farm.submit(models(1), "key=noop:c", "cpu", settings=RunSettings(diff_runs=0))
    (job,) = wait_until(
        lambda: [j for j in farm.jobs(sub.campaign_id) if j.state == "running"],
        30,
        "the long job to start",
    )
    with farm.engine.begin() as conn:
        jobs.cancel(conn, sub.campaign_id)
    cancelled_at = time.monotonic()
    ended = f"df-job-{job.id}-{job.attempt}] succeeded in"
    wait_until(lambda: ended in agent.log.read_text(), 15, "the group to drop the job")
    assert time.monotonic() - cancelled_at < 10
    assert "'stale'" in agent.log.read_text().split(ended, 1)[1].splitlines()[0]
    assert [j.state for j in farm.jobs(sub.campaign_id)] == [CANCELLED]
    assert farm.results(sub.campaign_id) == []


def test_phones_share_a_group_in_the_embedded_farm(tmp_path, monkeypatch) -> None:
    """Two simulated phones behind the real adb server, served by one group of the
    embedded farm (`devicefarm run`: SQLite, kombu's filesystem broker): every job once,
    each phone's tool output kept with its own result."""
    from tests.integration.test_android_campaign import _lab, _results, devicefarm

    monkeypatch.setenv("DEVICEFARM_GROUP_DEVICES", GROUP)
    lab = _lab(tmp_path, ["pixel-7", "galaxy-s23"])
    server, phones, tools = next(lab)
    try:
        models = [write_model(tmp_path / f"m{i}.tflite", 1.0 + i) for i in range(2)]
        home = tmp_path / "home"
        args = ["run", *map(str, models), "--devices", "android", "--configs", "cpu,gpu-fp32"]
        done = devicefarm([*args, "--runs", "3"], home, server, tools)
        assert done.returncode == 0, done.stdout + done.stderr
        rows = _results(home)
        assert len(rows) == 8 and {r["state"] for r in rows} == {"succeeded"}
        gpus = ("Mali-G710", "Adreno")  # pixel-7's, galaxy-s23's
        renderer = {f"android:{ph.serial}": g for ph, g in zip(phones, gpus, strict=True)}
        for r in rows:  # each result holds its own phone's run
            bench, facts = json.loads(r["benchmark"]), json.loads(r["device_facts"])
            assert bench["source"] == "benchmark_model" and bench["avg_us"] > 0
            assert facts["key"] == r["device_key"]
            assert facts["facts"]["gles_renderer"].startswith(renderer[r["device_key"]])
        logs = home / "logs"
        assert (logs / "group-0.log").exists(), sorted(p.name for p in logs.iterdir())
        assert not list(logs.glob("df.android*.log"))  # no consumer process of their own
    finally:
        lab.close()


def test_group_size_is_checked_before_any_work(tmp_path) -> None:
    """A bad DEVICEFARM_GROUP_DEVICES is one line and exit 2 before discovery."""
    import subprocess
    import sys

    env = dict(os.environ, DEVICEFARM_GROUP_DEVICES="lots", DEVICEFARM_HOME=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-m", "devicefarm.cli", "worker", "--devices", "noop:x"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "DEVICEFARM_GROUP_DEVICES" in done.stderr
