"""A lab shared by projects, on real PostgreSQL, Redis and Celery agents (issue 42): fair
share on shared devices, quotas (concurrent jobs, device-minutes per day) and device
reservations. Each test fails on the farm before them: every job was sent at submission,
first come first served, with no quota and no reservation.

The fair-share figures are written to the test's output (`pytest -s`)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import func, select, text

from farm_core import quotas, reservations
from farm_core.schema import DISPATCHED, QUEUED, RUNNING, SUCCEEDED, TERMINAL_STATES, Job, utcnow
from tests.integration.conftest import Farm
from tests.support.farm import wait_until
from tests.support.projects import queued_campaign

pytestmark = pytest.mark.integration

TABLES = "artifacts, results, attempts, jobs, campaigns, reservations, projects, devices, models"


@pytest.fixture
def lab(pg_session_url: str, redis_url: str, fast_timing) -> Iterator[Farm]:
    """A farm on an emptied database: projects and reservations too."""
    farm = Farm(pg_session_url, redis_url)
    with farm.engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {TABLES} RESTART IDENTITY"))
    yield farm
    farm.close()


def project_jobs(farm: Farm, project: str) -> list:
    with farm.engine.begin() as conn:
        return conn.execute(select(Job).where(Job.project == project).order_by(Job.id)).all()


def all_ended(farm: Farm, project: str) -> list | None:
    rows = project_jobs(farm, project)
    return rows if rows and all(j.state in TERMINAL_STATES for j in rows) else None


def test_a_small_campaign_is_not_starved_by_a_big_one(lab, start_agent, tmp_path) -> None:
    """200 jobs of `big` on two shared devices, then 10 of `small`: small's end within
    big's first jobs (before: after every one of big's), with no reconciler pass."""
    devices = [f"noop:fair{i}?delay_s=0.05&tags=shared" for i in (1, 2)]
    start_agent("F", devices, lab.db_url, lab.broker_url)
    queued_campaign(lab.engine, tmp_path / "big", "big", 50, "tag=shared", "cpu,gpu-fp32")
    t0 = time.monotonic()
    lab.reconcile()  # sends each device its first jobs; the workers send the rest
    wait_until(
        lambda: sum(j.state == SUCCEEDED for j in project_jobs(lab, "big")) >= 20,
        60,
        "big's first 20 jobs",
    )
    queued_campaign(lab.engine, tmp_path / "small", "small", 5, "tag=shared", "cpu")
    t_small = time.monotonic()
    small = wait_until(lambda: all_ended(lab, "small"), 60, "small's 10 jobs", 0.05)
    small_s = time.monotonic() - t_small
    big = wait_until(lambda: all_ended(lab, "big"), 120, "big's 200 jobs", 0.2)
    big_s = time.monotonic() - t0
    assert len(small) == 10 and len(big) == 200
    assert {j.state for j in small + big} == {SUCCEEDED}
    small_end = max(j.finished_at for j in small)
    small_start = min(j.created_at for j in small)
    big_before = sum(j.finished_at <= small_start for j in big)
    big_during = sum(small_start < j.finished_at <= small_end for j in big)
    print(
        f"\nfair share: small's 10 jobs done {small_s:.1f} s after submission, while "
        f"{big_during} of big's ran ({big_before} before it came); big's 200 took {big_s:.1f} s"
    )
    assert big_during <= 2 * 10 + 2 * 8  # its turns, and the queues it found full
    assert 200 - big_before - big_during >= 100  # before: every one of big's ran first


def test_a_project_runs_no_more_than_its_concurrent_quota(lab, start_agent, tmp_path) -> None:
    with lab.engine.begin() as conn:
        quotas.add(conn, "capped", max_concurrent_jobs=2)
    start_agent(
        "Q", [f"noop:q{i}?delay_s=0.3&tags=q" for i in range(4)], lab.db_url, lab.broker_url
    )
    queued_campaign(lab.engine, tmp_path / "m", "capped", 4, "tag=q", "cpu")  # 16 jobs
    peak_out = peak_running = 0
    reasons: set[str] = set()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        lab.reconcile()
        rows = project_jobs(lab, "capped")
        peak_out = max(peak_out, sum(j.state in (DISPATCHED, RUNNING) for j in rows))
        peak_running = max(peak_running, sum(j.state == RUNNING for j in rows))
        reasons |= {j.reason for j in rows if j.state == QUEUED and j.reason}
        if all(j.state in TERMINAL_STATES for j in rows):
            break
        time.sleep(0.05)
    assert {j.state for j in rows} == {SUCCEEDED}
    assert peak_out <= 2 and peak_running <= 2  # before: 4, one per device
    assert reasons == {"waiting: project capped at its quota of 2 concurrent jobs"}


def test_a_project_out_of_device_minutes_waits_and_is_refused(lab, start_agent, tmp_path) -> None:
    with lab.engine.begin() as conn:
        quotas.add(conn, "daily", device_minutes_per_day=0.02)  # 1.2 device-seconds
    start_agent("D", ["noop:d?delay_s=0.5"], lab.db_url, lab.broker_url)
    queued_campaign(lab.engine, tmp_path / "m", "daily", 8, "key=noop:d", "cpu")

    def held() -> list | None:
        lab.reconcile()
        rows = project_jobs(lab, "daily")
        waiting = [j for j in rows if j.state == QUEUED and "device-minutes" in j.reason]
        busy = any(j.state in (DISPATCHED, RUNNING) for j in rows)
        return rows if waiting and not busy else None

    rows = wait_until(held, 60, "the project's jobs to wait for tomorrow")
    done = [j for j in rows if j.state == SUCCEEDED]
    assert 2 <= len(done) < 8  # the quota ran out part way (a job started may finish)
    queued = [j for j in rows if j.state == QUEUED]
    assert all("of its 0.02 device-minutes for today (UTC)" in j.reason for j in queued)
    with lab.engine.begin() as conn:
        (why,) = quotas.submission_errors(conn, "daily")
    assert why.startswith("project daily used ") and "resets at 00:00 UTC" in why
    time.sleep(1.5)
    assert all(
        j.state == QUEUED for j in project_jobs(lab, "daily") if j.id in {q.id for q in queued}
    )
    with lab.engine.begin() as conn:  # the admin raises the quota: the jobs go on
        quotas.change(conn, "daily", device_minutes_per_day=None)
    ended = wait_until(lambda: (lab.reconcile(), all_ended(lab, "daily"))[1], 60, "the rest")
    assert {j.state for j in ended} == {SUCCEEDED}


def test_a_reserved_device_runs_only_its_holders_jobs_until_the_end(
    lab, start_agent, tmp_path
) -> None:
    """Others' jobs already in the device's queue are held when a worker claims them,
    theirs sent later wait saying until when, and all run once the reservation is over."""
    start_agent("R", ["noop:r?delay_s=1"], lab.db_url, lab.broker_url)
    queued_campaign(lab.engine, tmp_path / "o", "others", 3, "key=noop:r", "cpu")
    lab.reconcile()  # all three sent: one starts, two wait in the broker
    wait_until(
        lambda: any(j.state == RUNNING for j in project_jobs(lab, "others")), 30, "a job to start"
    )
    now = utcnow()
    with lab.engine.begin() as conn:
        held = reservations.reserve(conn, "noop:r", "ana", "lab", now, now + timedelta(seconds=8))
        with pytest.raises(Exception, match="may not overlap"):
            reservations.reserve(conn, "noop:r", "bo", "x", now, now + timedelta(hours=1))
    queued_campaign(lab.engine, tmp_path / "l", "lab", 1, "key=noop:r", "cpu")
    lab.reconcile()
    ours = wait_until(lambda: all_ended(lab, "lab"), 30, "the holder's job")
    assert ours[0].finished_at < held.ends_at  # it ran during the reservation

    def waiting() -> list | None:
        rows = [j for j in project_jobs(lab, "others") if j.state == QUEUED]
        return rows if len(rows) == 2 and all("reserved by ana" in j.reason for j in rows) else None

    rows = wait_until(waiting, 30, "the others' jobs to wait")
    assert all(f"until {reservations.when(held.ends_at)}" in j.reason for j in rows)
    assert any(j.attempt > 1 for j in rows)  # its message came, and the claim held it
    others = wait_until(lambda: (lab.reconcile(), all_ended(lab, "others"))[1], 60, "the others")
    assert {j.state for j in others} == {SUCCEEDED}
    late = [j for j in others if j.id in {r.id for r in rows}]
    assert all(j.started_at >= held.ends_at for j in late)  # none started while it held
    with lab.engine.begin() as conn:
        n = conn.execute(select(func.count()).select_from(Job).where(Job.reason != "")).scalar()
    assert n == 0  # their waiting reasons went with them


def test_others_jobs_go_to_a_free_device_of_the_same_hardware(lab, start_agent, tmp_path) -> None:
    start_agent(
        "S",
        ["noop:s1?delay_s=0.2&tags=s", "noop:s2?delay_s=0.2&tags=s"],
        lab.db_url,
        lab.broker_url,
    )
    now = utcnow()
    with lab.engine.begin() as conn:
        reservations.reserve(conn, "noop:s1", "ana", "lab", now, now + timedelta(minutes=10))
    campaign = queued_campaign(lab.engine, tmp_path / "o", "others", 3, "tag=s", "cpu")
    jobs = lab.wait_done(campaign, timeout_s=60)
    assert {j.state for j in jobs} == {SUCCEEDED}
    assert {j.device_key for j in jobs} == {"noop:s2"}  # s1's three moved to s2
    assert sum(j.planned_device == "noop:s1" for j in jobs) == 3
