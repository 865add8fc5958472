"""The job body, run as a plain function on a no-op device (no broker, no Celery worker)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select, update

from delegate_runtime.errors import DeviceError, DevicefarmError
from farm_core.schema import (
    DISPATCHED,
    FAILED,
    QUARANTINED,
    SUCCEEDED,
    TIMED_OUT,
    Campaign,
    Device,
    Job,
    Result,
)
from orchestrator.submit import submit
from tests.support.farm import (
    RecordingDispatcher,
    add_device,
    noop_context,
    sqlite_engine,
    write_model,
)
from worker_agent.consumer import ConsumerContext
from worker_agent.executor import STALE, execute_job


def make_ctx(tmp_path: Path, spec: str = "noop:a", **timing) -> ConsumerContext:
    return noop_context(tmp_path, spec, **timing)


@pytest.fixture
def engine(tmp_path: Path):
    engine = sqlite_engine(tmp_path)
    add_device(engine, "noop:a")
    add_device(engine, "noop:b")
    submit(engine, RecordingDispatcher(), [write_model(tmp_path / "m.tflite")], "key=noop:a", "cpu")
    return engine


def state(engine) -> tuple:
    with engine.begin() as c:
        return tuple(c.execute(select(Job.state, Job.attempt, Job.device_key, Job.reason)).one())


def test_success_writes_one_result_with_device_facts(engine, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    assert execute_job(ctx, 1, 1) == SUCCEEDED
    assert execute_job(ctx, 1, 1) == STALE  # redelivered after success
    with engine.begin() as c:
        assert c.execute(select(func.count()).select_from(Result)).scalar() == 1
        r = c.execute(select(Result)).one()
    assert r.outcome == SUCCEEDED and r.avg_us == 1.0 and r.device_facts["key"] == "noop:a"
    assert (tmp_path / "cache" / "models").is_dir()


def test_device_error_retries_on_another_matching_device(engine, tmp_path: Path) -> None:
    with engine.begin() as c:
        c.execute(update(Campaign).values(selector="kind=noop"))
    ctx = make_ctx(tmp_path, "noop:a?error=device")
    assert execute_job(ctx, 1, 1) == "retried"
    sent = ctx.dispatcher.sent
    assert [(o.device_key, o.attempt) for o in sent] == [("noop:b", 2)]
    assert sent[0].countdown_s > 0  # backoff
    s = state(engine)
    assert s[:3] == (DISPATCHED, 2, "noop:b") and "DeviceError" in s[3]


@pytest.mark.parametrize(
    ("error", "want", "needle"),
    [("model", FAILED, "ModelError"), ("bug", FAILED, "bug: RuntimeError")],
)
def test_user_errors_and_bugs_fail_without_retry(engine, tmp_path, error, want, needle) -> None:
    ctx = make_ctx(tmp_path, f"noop:a?error={error}")
    assert execute_job(ctx, 1, 1) == want
    assert ctx.dispatcher.sent == []
    s = state(engine)
    assert s[0] == want and needle in s[3]


class _FlakyLink(DevicefarmError):
    """An error class outside the DeviceError family that says it may be retried."""

    retryable = True


class _StubbornDevice(DeviceError):
    """A DeviceError subclass that says retrying will not help."""

    retryable = False


@pytest.mark.parametrize(
    ("error", "want_outcome", "want_state"),
    [(_FlakyLink, "retried", DISPATCHED), (_StubbornDevice, FAILED, FAILED)],
    ids=["retryable-true-retries", "retryable-false-fails"],
)
def test_the_error_class_retryable_flag_decides_retries(
    engine, tmp_path, monkeypatch, error, want_outcome, want_state
) -> None:
    with engine.begin() as c:
        c.execute(update(Campaign).values(selector="kind=noop"))
    ctx = make_ctx(tmp_path)

    def run(spec):
        raise error("link dropped")

    monkeypatch.setattr(ctx.runner, "run", run)
    assert execute_job(ctx, 1, 1) == want_outcome
    s = state(engine)
    assert s[0] == want_state and error.__name__ in s[3]


def test_soft_time_limit_times_the_job_out(engine, tmp_path, monkeypatch) -> None:
    from celery.exceptions import SoftTimeLimitExceeded

    ctx = make_ctx(tmp_path)

    def slow(spec):
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(ctx.runner, "run", slow)
    assert execute_job(ctx, 1, 1) == TIMED_OUT
    assert state(engine)[0] == TIMED_OUT


def test_a_tool_past_its_deadline_times_the_job_out_and_keeps_its_log(
    engine, tmp_path, monkeypatch
) -> None:
    from delegate_runtime.errors import JobTimeout

    ctx = make_ctx(tmp_path)

    def stuck(spec):
        raise JobTimeout("benchmark_model ran past its 5 s deadline", "INFO: partial output")

    monkeypatch.setattr(ctx.runner, "run", stuck)
    assert execute_job(ctx, 1, 1) == TIMED_OUT
    assert ctx.dispatcher.sent == []  # not retried
    s = state(engine)
    assert s[0] == TIMED_OUT and "ran past its 5 s deadline" in s[3]
    with engine.begin() as c:
        assert c.execute(select(Result.log)).scalar() == "INFO: partial output"


def test_failing_canary_quarantines_and_jobs_move_away(engine, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, "noop:a?canary=fail", canary_every_jobs=1)
    with engine.begin() as c:
        c.execute(update(Campaign).values(selector="kind=noop"))
    assert execute_job(ctx, 1, 1) == SUCCEEDED  # the canary runs after the job
    with engine.begin() as c:
        health, why = c.execute(
            select(Device.health, Device.health_reason).where(Device.key == "noop:a")
        ).one()
    assert health == QUARANTINED and "canary failed" in why
    # a second job for the quarantined device is moved, not run
    submit(engine, RecordingDispatcher(), [tmp_path / "m.tflite"], "key=noop:b", "cpu")
    with engine.begin() as c:
        c.execute(update(Job).where(Job.id == 2).values(device_key="noop:a"))
    assert execute_job(ctx, 2, 1) == "moved"
    assert ctx.dispatcher.sent[-1].device_key == "noop:b"


def test_a_device_the_database_says_is_quarantined_starts_no_job(engine, tmp_path) -> None:
    """Quarantined by another process of the device (or the reconciler): the health read
    with the claim moves the job, though this consumer's own flag says nothing."""
    ctx = make_ctx(tmp_path)
    with engine.begin() as c:
        c.execute(update(Campaign).values(selector="kind=noop"))
        c.execute(update(Device).where(Device.key == "noop:a").values(health=QUARANTINED))
    assert not ctx.quarantined
    assert execute_job(ctx, 1, 1) == "moved"
    assert ctx.dispatcher.sent[-1].device_key == "noop:b"
    with engine.begin() as c:
        assert c.execute(select(func.count()).select_from(Result)).scalar() == 0
