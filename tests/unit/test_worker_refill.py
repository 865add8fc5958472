"""A worker fills its own device's queue when the queue is down to its last job: never dry
while jobs wait, one fill per `queue_depth() - 1` jobs (worker_agent.tasks.refill)."""

from __future__ import annotations

from collections import deque
from pathlib import Path

from sqlalchemy import func, select

from farm_core.device_queue import queue_depth
from farm_core.schema import Result
from orchestrator.submit import submit
from tests.support.farm import RecordingDispatcher, add_device, sqlite_engine, write_model
from worker_agent.consumer import ConsumerContext
from worker_agent.discovery import noop_device
from worker_agent.executor import execute_job
from worker_agent.tasks import refill

JOBS = 30


def test_the_queue_is_filled_when_its_last_job_is_left(tmp_path: Path) -> None:
    engine = sqlite_engine(tmp_path)
    add_device(engine, "noop:a")
    models = [write_model(tmp_path / f"m{i}.tflite", 1.0 + i) for i in range(JOBS)]
    first = RecordingDispatcher()
    submit(engine, first, models, "key=noop:a", "cpu")
    depth = queue_depth()
    assert len(first.sent) == depth  # the rest wait in the database
    ctx = ConsumerContext(
        noop_device("noop:a", "h"), f"sqlite:///{tmp_path / 'farm.db'}", "unused://", "w1"
    )
    ctx.__dict__["dispatcher"] = RecordingDispatcher()
    queue = deque(first.sent)
    fills = []  # (jobs run, jobs left in the queue, jobs sent)
    ran = 0
    while queue:
        order = queue.popleft()
        execute_job(ctx, order.job_id, order.attempt)
        ran += 1
        before = len(ctx.dispatcher.sent)
        refill(ctx)
        sent = ctx.dispatcher.sent[before:]
        if sent:
            fills.append((ran, len(queue), len(sent)))
            queue.extend(sent)
    assert ran == JOBS
    with engine.begin() as c:
        assert c.execute(select(func.count()).select_from(Result)).scalar() == JOBS
    # the consumer knows nothing of its queue at first: its first fill tops it up
    assert fills[0] == (1, depth - 1, 1)
    # then one fill each time the queue is down to its last job, filling it to its depth
    assert [left for _, left, _ in fills[1:]] == [1] * (len(fills) - 1)
    assert [n for _, _, n in fills[1:-1]] == [depth - 1] * (len(fills) - 2)
    assert len(fills) == 1 + -(-(JOBS - depth - 1) // (depth - 1))


def test_a_count_that_drifted_never_lets_the_queue_run_dry(tmp_path: Path) -> None:
    """The consumer's own count of jobs to the next fill can drift from its queue (a
    message that ran no job, a pool child replaced): the database's count of the device's
    jobs out decides as well, so the queue is filled at its last job all the same (before:
    the device ran dry and waited for the reconciler)."""
    engine = sqlite_engine(tmp_path)
    add_device(engine, "noop:a")
    models = [write_model(tmp_path / f"m{i}.tflite", 1.0 + i) for i in range(JOBS)]
    first = RecordingDispatcher()
    submit(engine, first, models, "key=noop:a", "cpu")
    ctx = ConsumerContext(
        noop_device("noop:a", "h"), f"sqlite:///{tmp_path / 'farm.db'}", "unused://", "w1"
    )
    ctx.__dict__["dispatcher"] = RecordingDispatcher()
    queue = deque(first.sent)
    ran = 0
    while queue:
        order = queue.popleft()
        execute_job(ctx, order.job_id, order.attempt)
        ran += 1
        ctx.jobs_to_fill += 5  # the count drifts past what the queue holds
        before = len(ctx.dispatcher.sent)
        refill(ctx)
        queue.extend(ctx.dispatcher.sent[before:])
    assert ran == JOBS
