"""A device's failure streak (farm_core/failure_streaks.py): quarantined after N failures
in a row for the device's reasons, and after N more once its canary put it back."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import insert, select, update

from farm_core import failure_streaks
from farm_core.schema import HEALTHY, QUARANTINED, SUCCEEDED, Attempt, Device, Result, utcnow
from orchestrator.submit import submit
from tests.support.farm import RecordingDispatcher, add_device, sqlite_engine, write_model

KEY = "noop:a"


@pytest.fixture
def engine(tmp_path: Path):
    engine = sqlite_engine(tmp_path)
    add_device(engine, KEY, health=HEALTHY)
    submit(engine, RecordingDispatcher(), [write_model(tmp_path / "m.tflite")], f"key={KEY}", "cpu")
    return engine


class Events:
    """Job endings on the device, one second apart (attempts of job 1)."""

    def __init__(self, engine):
        self.engine, self.n, self.t = engine, 0, utcnow()

    def _next(self):
        self.n += 1
        self.t += timedelta(seconds=1)
        return self.n, self.t

    def fail(self, outcome: str = failure_streaks.DEVICE_FAILED) -> str:
        n, t = self._next()
        with self.engine.begin() as c:
            c.execute(
                insert(Attempt).values(
                    job_id=1, attempt=n, device_key=KEY, outcome=outcome,
                    reason=f"ToolOutputError: crash {n}\nraw output", at=t,
                )
            )  # fmt: skip
            return failure_streaks.check(c, KEY)

    def succeed(self) -> None:
        n, t = self._next()
        with self.engine.begin() as c:
            c.execute(
                insert(Result).values(
                    job_id=1, attempt=n, campaign_id=1, model_sha256="x", device_key=KEY,
                    config="cpu", outcome=SUCCEEDED, created_at=t,
                )
            )  # fmt: skip


def health(engine) -> tuple[str, str]:
    with engine.begin() as c:
        return tuple(c.execute(select(Device.health, Device.health_reason)).one())


def back_in_service(engine) -> None:
    with engine.begin() as c:
        c.execute(update(Device).values(health=HEALTHY, health_reason=""))


def test_three_failures_in_a_row_quarantine_the_device_naming_them(engine) -> None:
    ev = Events(engine)
    assert ev.fail() == "" and ev.fail("device_error") == ""
    why = ev.fail()
    assert why.startswith("3 jobs in a row failed on this device: job 1: ToolOutputError: crash 1;")
    assert "crash 3" in why and "raw output" not in why
    assert health(engine) == (QUARANTINED, why)


def test_a_success_ends_the_streak(engine) -> None:
    ev = Events(engine)
    ev.fail(), ev.fail()
    ev.succeed()
    assert ev.fail() == "" and ev.fail() == ""
    assert health(engine)[0] == HEALTHY
    assert ev.fail() != ""


def test_back_in_service_the_streak_starts_over(engine) -> None:
    ev = Events(engine)
    for _ in range(3):
        ev.fail()
    back_in_service(engine)  # its canary passed
    assert [ev.fail(), ev.fail()] == ["", ""]
    assert health(engine)[0] == HEALTHY
    assert ev.fail().startswith("3 jobs in a row")


def test_other_outcomes_neither_count_nor_end_it(engine) -> None:
    ev = Events(engine)
    ev.fail(), ev.fail("device_lost"), ev.fail("lease_expired"), ev.fail("returned")
    assert health(engine)[0] == HEALTHY
    assert ev.fail() == "" and ev.fail() != ""


def test_streak_length_from_the_environment(engine, monkeypatch) -> None:
    monkeypatch.setenv(failure_streaks.ENV_STREAK_JOBS, "1")
    assert Events(engine).fail().startswith("1 job in a row")
    monkeypatch.setenv(failure_streaks.ENV_STREAK_JOBS, "x")
    from delegate_runtime.errors import UsageError

    with pytest.raises(UsageError, match="not a whole number"):
        failure_streaks.streak_jobs()
