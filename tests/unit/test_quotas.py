"""Project quotas: concurrent jobs and device-minutes per day, at submission, at dispatch
and when a worker claims a job; the admin's `devicefarm projects`."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select, update

from farm_core import device_queue, jobs, quotas
from farm_core.schema import QUEUED, RUNNING, SUCCEEDED, Job, utcnow
from orchestrator.submit import SubmissionError, submit
from tests.support.farm import RecordingDispatcher, add_device, sqlite_engine, write_model
from tests.support.projects import queued_campaign, run

DEVICES = [f"noop:{c}" for c in "abcd"]


@pytest.fixture
def farm(tmp_path: Path):
    engine = sqlite_engine(tmp_path)
    for key in DEVICES:
        add_device(engine, key)
    return engine


def states(engine, project: str) -> list[str]:
    with engine.begin() as c:
        return c.execute(select(Job.state).where(Job.project == project)).scalars().all()


def test_dispatch_keeps_a_project_to_its_concurrent_quota(farm, tmp_path) -> None:
    with farm.begin() as c:
        quotas.add(c, "vision", max_concurrent_jobs=2)
    queued_campaign(farm, tmp_path / "m", "vision", 3, "kind=noop")  # 12 jobs, 4 devices
    out = device_queue.fill(farm, RecordingDispatcher(), DEVICES)
    assert len(out.sent) == 2 and "at its quota of 2 concurrent jobs" in out.held["vision"]
    with farm.begin() as c:
        reasons = c.execute(select(Job.reason).where(Job.state == QUEUED)).scalars().all()
    assert reasons and all(
        r == "waiting: project vision at its quota of 2 concurrent jobs" for r in reasons
    )
    run(farm, out.sent)
    again = device_queue.fill(farm, RecordingDispatcher(), DEVICES)
    assert len(again.sent) == 2
    with farm.begin() as c:
        sent_reasons = (
            c.execute(select(Job.reason).where(Job.id.in_([o.job_id for o in again.sent])))
            .scalars()
            .all()
        )
    assert set(sent_reasons) == {""}  # a held job that goes loses its reason


def test_other_projects_use_the_devices_a_capped_project_leaves(farm, tmp_path) -> None:
    with farm.begin() as c:
        quotas.add(c, "vision", max_concurrent_jobs=1)
    queued_campaign(farm, tmp_path / "v", "vision", 4, "key=noop:a")
    queued_campaign(farm, tmp_path / "s", "speech", 4, "key=noop:a")
    sent = device_queue.fill(farm, RecordingDispatcher(), ["noop:a"]).sent
    with farm.begin() as c:
        projects = [c.execute(select(Job.project).where(Job.id == o.job_id)).scalar() for o in sent]
    assert sorted(projects) == ["speech"] * 4 + ["vision"]  # 1 of vision's 4


def test_a_claim_past_the_quota_goes_back_to_the_queue(farm, tmp_path) -> None:
    """Two fills that raced (or a quota lowered since the send): the worker starts no job
    past the quota."""
    queued_campaign(farm, tmp_path / "m", "vision", 1, "kind=noop")  # 4 jobs
    sent = device_queue.fill(farm, RecordingDispatcher(), DEVICES).sent
    assert len(sent) == 4
    with farm.begin() as c:
        quotas.add(c, "vision", max_concurrent_jobs=2)
        for o in sent[:2]:
            assert jobs.claim(c, o.job_id, o.attempt, "w", 60)
        assert jobs.claim(c, sent[2].job_id, sent[2].attempt, "w", 60) is None
        row = c.execute(select(Job).where(Job.id == sent[2].job_id)).one()
    assert (row.state, row.attempt) == (QUEUED, sent[2].attempt + 1)
    assert row.reason == "waiting: project vision at its quota of 2 concurrent jobs"
    assert sorted(states(farm, "vision")) == ["dispatched", QUEUED, RUNNING, RUNNING]


def _used(engine, project: str, minutes: float, now: datetime) -> None:
    """Jobs of `project` that ran `minutes` up to `now`."""
    with engine.begin() as c:
        ids = c.execute(select(Job.id).where(Job.project == project)).scalars().all()
        for i in ids:
            c.execute(
                update(Job)
                .where(Job.id == i)
                .values(
                    state=SUCCEEDED,
                    started_at=now - timedelta(minutes=minutes / len(ids)),
                    finished_at=now,
                )
            )


def test_a_project_past_its_daily_minutes_is_refused_and_its_jobs_wait(farm, tmp_path) -> None:
    with farm.begin() as c:
        quotas.add(c, "vision", device_minutes_per_day=30)
    queued_campaign(farm, tmp_path / "old", "vision", 1, "kind=noop")
    # Noon, not the wall clock: 31 minutes before 00:19 UTC are mostly yesterday's.
    noon = quotas.day_start(utcnow()) + timedelta(hours=12)
    _used(farm, "vision", 31.0, noon)
    waiting = queued_campaign(farm, tmp_path / "new", "speech", 1, "key=noop:a")
    with farm.begin() as c:
        c.execute(update(Job).where(Job.campaign_id == waiting).values(project="vision"))
        assert quotas.minutes_today(c, "vision", noon) == pytest.approx(31.0, abs=0.1)
        errors = quotas.submission_errors(c, "vision", noon)
    assert errors and "used 31.0 of its 30 device-minutes for today" in errors[0]
    out = device_queue.fill(farm, RecordingDispatcher(), DEVICES, now=noon)
    assert out.sent == [] and "resets at 00:00 UTC" in out.held["vision"]


def test_minutes_of_yesterday_do_not_count(farm, tmp_path) -> None:
    queued_campaign(farm, tmp_path / "m", "vision", 1, "key=noop:a")
    start = quotas.day_start(utcnow())
    with farm.begin() as c:
        c.execute(
            update(Job).values(
                state=SUCCEEDED,
                started_at=start - timedelta(minutes=50),
                finished_at=start + timedelta(minutes=10),
            )
        )
        assert quotas.minutes_today(c, "vision", start + timedelta(hours=1)) == pytest.approx(10)


def test_a_project_with_a_zero_quota_can_never_run_a_campaign(farm, tmp_path) -> None:
    with farm.begin() as c:
        quotas.add(c, "frozen", max_concurrent_jobs=0)
        errors = quotas.submission_errors(c, "frozen")
    assert errors == ["project frozen has a quota of 0 concurrent jobs: none of its jobs can run"]


def test_submission_refuses_a_project_past_its_quota(farm, tmp_path) -> None:
    import inspect

    if "project" not in inspect.signature(submit).parameters:
        pytest.skip("submit takes no project yet")
    with farm.begin() as c:
        quotas.add(c, "frozen", device_minutes_per_day=0)
    model = write_model(tmp_path / "m.tflite")
    with pytest.raises(SubmissionError, match="0 device-minutes per day"):
        submit(farm, RecordingDispatcher(), [model], "kind=noop", "cpu", project="frozen")
    with farm.begin() as c:
        assert c.execute(select(Job.id)).first() is None  # nothing half-submitted


def cli(*argv: str) -> int:
    from devicefarm.cli import main

    return main(list(argv))


def test_projects_cli_adds_sets_and_lists(farm, tmp_path, capsys) -> None:
    db = ["--db", str(farm.url)]
    assert cli("projects", "add", "vision", "--max-concurrent-jobs", "4", *db) == 0
    assert cli("projects", "add", "vision", *db) == 1
    assert "exists already" in capsys.readouterr().err
    assert cli("projects", "set", "vision", "--device-minutes-per-day", "600", *db) == 0
    assert "at most 4 concurrent jobs, 600 device-minutes" in capsys.readouterr().out
    assert cli("projects", "set", "vision", "--max-concurrent-jobs", "none", *db) == 0
    queued_campaign(farm, tmp_path / "m", "vision", 1, "kind=noop")
    run(farm, device_queue.fill(farm, RecordingDispatcher(), ["noop:a"]).sent)
    capsys.readouterr()
    assert cli("projects", "list", *db) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        *("project", "jobs", "out", "max", "jobs", "minutes", "today", "minutes/day", "queued")
    ]
    vision = next(line.split() for line in lines if line.startswith("vision"))
    assert vision[1:3] == ["0", "-"] and vision[4:] == ["600", "3"]
    assert cli("projects", "add", "no good", *db) == 1
    assert "letters, digits" in capsys.readouterr().err
