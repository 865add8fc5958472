"""A device's short jobs in batches (worker_agent.batches): several dispatches per message once
its jobs are short, each run as its own message's would be, on SQLite with no broker."""

from __future__ import annotations

import time
from collections import deque
from pathlib import Path

import pytest
from sqlalchemy import func, select, update

from delegate_runtime.errors import DeviceError
from farm_core import job_batches, jobs
from farm_core.schema import CANCELLED, QUEUED, SUCCEEDED, TIMED_OUT, Attempt, Campaign, Job, Result
from orchestrator.submit import submit
from tests.support.farm import (
    RecordingDispatcher,
    add_device,
    noop_context,
    sqlite_engine,
    write_model,
)
from worker_agent import batches, job_pace
from worker_agent.consumer import ConsumerContext
from worker_agent.executor import STALE
from worker_agent.tasks import run_dispatches

JOBS = 40


def make_ctx(tmp_path: Path, spec: str = "noop:a", **timing) -> ConsumerContext:
    return noop_context(tmp_path, spec, **timing)


def farm_with_jobs(tmp_path: Path, n: int, selector: str = "key=noop:a") -> tuple:
    engine = sqlite_engine(tmp_path)
    add_device(engine, "noop:a")
    add_device(engine, "noop:b")
    models = [write_model(tmp_path / f"m{i}.tflite", 1.0 + i) for i in range(n)]
    first = RecordingDispatcher()
    submit(engine, first, models, selector, "cpu")
    return engine, first


def run_queue(ctx: ConsumerContext, first: RecordingDispatcher) -> list[int]:
    """Run every message as the device's consumer would, in order, the refill's after the
    submission's; the dispatches each message carried."""
    queue = deque(first.messages)
    carried = []
    while queue:
        message = queue.popleft()
        seen = len(ctx.dispatcher.messages)
        run_dispatches(ctx, [(o.job_id, o.attempt) for o in message])
        carried.append(len(message))
        queue.extend(ctx.dispatcher.messages[seen:])
    return carried


def results_per_job(engine) -> dict[int, int]:
    with engine.begin() as c:
        rows = c.execute(select(Result.job_id, func.count()).group_by(Result.job_id)).all()
    return dict(rows)


def test_short_jobs_come_in_batches_and_each_runs_once(tmp_path: Path) -> None:
    engine, first = farm_with_jobs(tmp_path, JOBS)
    ctx = make_ctx(tmp_path)
    carried = run_queue(ctx, first)
    assert sum(carried) == JOBS
    per_job = results_per_job(engine)
    assert len(per_job) == JOBS and set(per_job.values()) == {1}
    with engine.begin() as c:
        assert {s for (s,) in c.execute(select(Job.state))} == {SUCCEEDED}
    # the submission's messages carry one each; after FAST_STREAK short jobs the refill's
    # carry up to the device's batch
    assert carried[: len(first.messages)] == [1] * len(first.messages)
    assert max(carried) == batches.batch_jobs() > 1
    assert len(carried) < JOBS / 2


def test_jobs_that_are_not_short_keep_one_per_message(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(job_pace.ENV_BATCH_BELOW_MS, "1")
    engine, first = farm_with_jobs(tmp_path, 12)
    ctx = make_ctx(tmp_path, "noop:a?delay_s=0.005")  # each job 5 ms: not under 1 ms
    carried = run_queue(ctx, first)
    assert carried == [1] * 12
    assert set(results_per_job(engine).values()) == {1}


def test_batches_can_be_switched_off(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(batches.ENV_BATCH_JOBS, "1")
    _, first = farm_with_jobs(tmp_path, 12)
    assert run_queue(make_ctx(tmp_path), first) == [1] * 12


def claimed_batch(engine, n: int) -> list[tuple[int, int]]:
    with engine.begin() as c:
        return [tuple(r) for r in c.execute(select(Job.id, Job.attempt).order_by(Job.id))][:n]


def test_a_soft_time_limit_ends_the_batch_and_gives_back_the_rest(
    tmp_path: Path, monkeypatch
) -> None:
    from celery.exceptions import SoftTimeLimitExceeded

    engine, _ = farm_with_jobs(tmp_path, 4)
    ctx = make_ctx(tmp_path)
    real = ctx.runner.run
    calls = []

    def run(spec):
        calls.append(spec.job_id)
        if len(calls) == 2:
            raise SoftTimeLimitExceeded()
        return real(spec)

    monkeypatch.setattr(ctx.runner, "run", run)
    batch = claimed_batch(engine, 4)
    outcomes = batches.execute_batch(ctx, batch)
    assert outcomes == [SUCCEEDED, TIMED_OUT, STALE, STALE]
    assert calls == [batch[0][0], batch[1][0]]
    with engine.begin() as c:
        rest = c.execute(
            select(Job.state, Job.attempt, Job.worker).where(Job.id.in_([j for j, _ in batch[2:]]))
        ).all()
        noted = c.execute(
            select(Attempt.job_id, Attempt.outcome).where(Attempt.outcome == job_batches.RELEASED)
        ).all()
    assert rest == [(QUEUED, 2, ""), (QUEUED, 2, "")]  # no failure counted, sent again
    assert sorted(noted) == [(j, job_batches.RELEASED) for j, _ in batch[2:]]
    assert set(results_per_job(engine)) == {batch[0][0], batch[1][0]}


def test_a_dispatch_cancelled_while_it_waits_is_not_run(tmp_path: Path, monkeypatch) -> None:
    engine, _ = farm_with_jobs(tmp_path, 3)
    ctx = make_ctx(tmp_path, lease_s=0.3)  # the lease thread renews every 0.1 s
    batch = claimed_batch(engine, 3)
    real = ctx.runner.run
    ran = []

    def run(spec):
        ran.append(spec.job_id)
        if spec.job_id == batch[0][0]:
            with engine.begin() as c:
                jobs.cancel(c, job_ids=[batch[1][0]])
            time.sleep(0.5)  # a renewal finds the waiting one gone
        return real(spec)

    monkeypatch.setattr(ctx.runner, "run", run)
    assert batches.execute_batch(ctx, batch) == [SUCCEEDED, STALE, SUCCEEDED]
    assert ran == [batch[0][0], batch[2][0]]
    with engine.begin() as c:
        assert c.execute(select(Job.state).where(Job.id == batch[1][0])).scalar() == CANCELLED


def test_a_stale_dispatch_in_a_batch_is_skipped(tmp_path: Path) -> None:
    engine, _ = farm_with_jobs(tmp_path, 3)
    batch = claimed_batch(engine, 3)
    stale = (batch[1][0], batch[1][1] + 1)  # an attempt the job never had
    outcomes = batches.execute_batch(make_ctx(tmp_path), [batch[0], stale, batch[2]])
    assert outcomes == [SUCCEEDED, STALE, SUCCEEDED]
    assert set(results_per_job(engine)) == {batch[0][0], batch[2][0]}


def test_a_device_quarantined_mid_batch_moves_the_rest(tmp_path: Path, monkeypatch) -> None:
    engine, _ = farm_with_jobs(tmp_path, 3, selector="kind=noop")
    ctx = make_ctx(tmp_path, "noop:a?canary=fail")
    with engine.begin() as c:  # every job planned on noop:a
        c.execute(update(Job).values(device_key="noop:a", planned_device="noop:a"))
        c.execute(update(Campaign).values(selector="kind=noop"))
    batch = claimed_batch(engine, 3)

    def run(spec):
        raise DeviceError("adb: device offline")

    monkeypatch.setattr(ctx.runner, "run", run)
    outcomes = batches.execute_batch(ctx, batch)
    assert outcomes == ["retried", "moved", "moved"]  # the canary failed after the first
    assert ctx.quarantined
    with engine.begin() as c:
        rest = [j for j, _ in batch[1:]]
        moved = c.execute(select(Job.device_key, Job.reason).where(Job.id.in_(rest))).all()
    assert {k for k, _ in moved} == {"noop:b"}, moved
    assert all("quarantined" in why for _, why in moved)


@pytest.mark.parametrize("took_s, want", [(0.001, 2), (0.2, 0)])
def test_the_streak_of_short_jobs(tmp_path: Path, took_s: float, want: int) -> None:
    ctx = make_ctx(tmp_path)
    job_pace.note_job(ctx, took_s)
    job_pace.note_job(ctx, took_s)
    assert ctx.short_jobs == want
    assert batches.per_message(ctx) == (batches.batch_jobs() if want else 1)
