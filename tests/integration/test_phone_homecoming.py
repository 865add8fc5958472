"""Phones in a shared lab (issue 42, last point), with real agents, Celery consumers, Redis,
PostgreSQL and simulated phones behind the real adb server: jobs moved off a phone that was
lost go back to it when it returns (before: they all ran on the other phone), and a phone
whose tool fails every job is quarantined after 3, with the reason (before: it stayed
healthy and failed every job sent to it); a model the CPU reference refuses as well does not
count against the phone."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from sqlalchemy import select

from farm_core.schema import (
    FAILED,
    HEALTHY,
    QUARANTINED,
    RUNNING,
    SUCCEEDED,
    TERMINAL_STATES,
    Attempt,
    Device,
)
from tests.integration.test_spine_stalls import PhoneLab
from tests.support.farm import wait_until

pytestmark = pytest.mark.integration
#: benchmark_model's pause on the phone that takes the moved jobs (twice per job: the
#: timed run and the op profile), so they still wait there when the lost phone returns.
SLOW_S = 2.0
#: The quarantined phone's canary is retried this often: long enough to see the quarantine
#: on a busy host (a phone's canary checks presence and tools only, so the retry puts a
#: phone with a broken tool back in service; 6 s once let a fourth job fail first).
HEALTH_RETRY_S = "20"
TABLES = "artifacts, results, attempts, jobs, campaigns, reservations, projects, devices, models"


@pytest.fixture
def pg_url(pg_session_url: str) -> str:
    """The session's database emptied (conftest's own misses reservations, which refer to
    devices: PostgreSQL refuses to truncate devices without them)."""
    from sqlalchemy import text

    from farm_core.database import open_database

    engine = open_database(pg_session_url)
    with engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {TABLES} RESTART IDENTITY"))
    engine.dispose()
    return pg_session_url


@pytest.fixture
def lab(farm, tmp_path):
    import importlib.util
    import shutil

    from tests.conftest import require

    require(shutil.which("adb") is not None, "adb (Debian package adb)")
    require(importlib.util.find_spec("adbutils") is not None, "adbutils")
    lab = PhoneLab(tmp_path, farm.db_url, farm.broker_url)
    yield lab
    lab.close()


def _device(farm, key: str):
    with farm.engine.begin() as conn:
        return conn.execute(select(Device).where(Device.key == key)).first()


def _online(farm, *keys: str) -> bool:
    return all((d := _device(farm, k)) is not None and d.state == "online" for k in keys)


def _attempts(farm, job_ids) -> list:
    with farm.engine.begin() as conn:
        return conn.execute(
            select(Attempt).where(Attempt.job_id.in_(list(job_ids))).order_by(Attempt.id)
        ).all()


def _refused_model(path):
    """A model the reader accepts and the CPU reference refuses (ADD version 99)."""
    from delegate_runtime.builder import ModelBuilder

    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 4), np.float32)
    y = g.tensor("y", (1, 4), np.float32)
    g.op("ADD", [x, g.const("w", np.full((1, 4), 2.0, np.float32))], [y], version=99)
    g.output(y)
    path.write_bytes(b.build())
    return path


def test_jobs_moved_off_a_lost_phone_return_to_it(farm, lab, models) -> None:
    home, other = lab.plug(), lab.plug()
    home_key, other_key = f"android:{home.serial}", f"android:{other.serial}"
    lab.agent("L")
    wait_until(lambda: _online(farm, home_key, other_key), 60, "both phones online")
    other.profile.faults.slow_s = SLOW_S
    home.profile.faults.slow_s = SLOW_S
    sub = farm.submit(models(4), "kind=android", "cpu")
    planned = [j.id for j in farm.jobs(sub.campaign_id) if j.planned_device == home_key]
    assert len(planned) == 4

    def running_at_home():
        return any(
            j.state == RUNNING and j.device_key == home_key for j in farm.jobs(sub.campaign_id)
        )

    wait_until(running_at_home, 60, "a job running on the phone")
    home.stop()  # lost mid-campaign: its jobs move to the other pixel

    def all_moved():
        farm.reconcile()
        jobs = [j for j in farm.jobs(sub.campaign_id) if j.id in planned]
        return all(j.device_key == other_key or j.state in TERMINAL_STATES for j in jobs)

    wait_until(all_moved, 60, "the lost phone's jobs to move")
    home.profile.faults.slow_s = 0.0
    lab.plug(home)  # back: its canary passes again and its consumer restarts
    jobs = farm.wait_done(sub.campaign_id, 240)
    assert all(j.state == SUCCEEDED for j in jobs), [(j.id, j.state, j.reason) for j in jobs]
    returned = {
        a.job_id: a for a in _attempts(farm, planned) if a.outcome == "returned"
    }  # fmt: skip
    assert len(returned) >= 2, _attempts(farm, planned)
    for j in jobs:
        if j.id in returned:
            assert j.device_key == home_key  # it ran where the campaign planned it
            assert returned[j.id].device_key == other_key
            assert returned[j.id].reason == f"returned to {home_key}, back online"
    moved_first = {a.job_id for a in _attempts(farm, returned) if a.device_key == home_key}
    assert moved_first == set(returned)  # each had been moved off the lost phone first


def test_a_phone_whose_tool_fails_every_job_is_quarantined_after_three(
    farm, lab, models, monkeypatch
) -> None:
    monkeypatch.setenv("DEVICEFARM_HEALTH_RETRY_S", HEALTH_RETRY_S)
    # the fourth job waits for the quarantined phone longer than the tests' device_gone_s
    farm.timing = dataclasses.replace(farm.timing, device_gone_s=120)
    phone = lab.plug()
    key = f"android:{phone.serial}"
    lab.agent("Q")
    wait_until(lambda: _online(farm, key), 60, "the phone online")
    phone.profile.faults.garbage = "noise"  # benchmark_model crashes on every model
    sub = farm.submit(models(4), f"key={key}", "cpu")

    def quarantined():
        farm.reconcile()
        d = _device(farm, key)
        return d if d.health == QUARANTINED else None

    device = wait_until(quarantined, 120, "the phone to be quarantined")
    jobs = farm.jobs(sub.campaign_id)
    failed = [j.id for j in jobs if j.state == FAILED]
    assert len(failed) == 3, [(j.id, j.state, j.reason) for j in jobs]
    why = device.health_reason
    assert why.startswith("3 jobs in a row failed on this device: "), why
    for job_id in failed:
        assert f"job {job_id}: ToolOutputError: benchmark_model on {key} gave no result" in why
    # the fourth job is not sent to it meanwhile; once the phone is mended and its canary
    # passes again, the phone is back in service and runs it
    phone.profile.faults.garbage = ""
    jobs = farm.wait_done(sub.campaign_id, 120)
    assert sorted(j.state for j in jobs) == [FAILED, FAILED, FAILED, SUCCEEDED]
    assert _device(farm, key).health == HEALTHY


def test_a_model_the_reference_refuses_does_not_count_against_the_phone(
    farm, lab, models, tmp_path
) -> None:
    phone = lab.plug()
    key = f"android:{phone.serial}"
    lab.agent("M")
    wait_until(lambda: _online(farm, key), 60, "the phone online")
    phone.profile.faults.garbage = "noise"
    first = farm.submit(models(2), f"key={key}", "cpu")
    assert [j.state for j in farm.wait_done(first.campaign_id, 120)] == [FAILED, FAILED]
    phone.profile.faults.garbage = ""  # its tool works; the model is the problem
    second = farm.submit([_refused_model(tmp_path / "add_v99.tflite")], f"key={key}", "cpu")
    (job,) = farm.wait_done(second.campaign_id, 120)
    assert job.state == FAILED and "ToolOutputError" in job.reason, job.reason
    (result,) = farm.results(second.campaign_id)
    assert "this runtime cannot run" in result.log  # the phone's tool said why
    device = _device(farm, key)
    assert device.health != QUARANTINED, device.health_reason
    with farm.engine.begin() as conn:
        counted = conn.execute(select(Attempt.job_id).where(Attempt.outcome == "device_failed"))
        assert sorted(counted.scalars()) == sorted(j.id for j in farm.jobs(first.campaign_id))
