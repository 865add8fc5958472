"""Helpers for tests: a recording dispatcher, engines and jobs on demand; labkit's lab pieces
(devices, models, ports, redis-servers), which benchmarks share, re-exported."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from farm_core.database import open_database
from farm_core.dispatch import SendOrder, messages
from labkit.farm_rows import add_device, write_model
from labkit.processes import STOP_GRACE_S, free_port, kill_group, wait_until
from labkit.redis_server import RedisServer

__all__ = [
    "STOP_GRACE_S",
    "RecordingDispatcher",
    "RedisServer",
    "add_device",
    "converter_named_model",
    "finish_jobs",
    "free_port",
    "kill_group",
    "noop_context",
    "sqlite_engine",
    "wait_until",
    "write_model",
]


class RecordingDispatcher:
    """A dispatcher that keeps what it is asked to send (or fails, when `broken`)."""

    def __init__(self, broken: str = ""):
        self.sent: list[SendOrder] = []
        self.messages: list[list[SendOrder]] = []  #: as dispatch.messages groups them
        self.broken = broken

    def send(
        self, orders: Sequence[SendOrder], per_message: int = 1
    ) -> tuple[list[SendOrder], str]:
        if self.broken:
            return [], self.broken
        self.sent.extend(orders)
        self.messages.extend(messages(orders, per_message))
        return list(orders), ""

    def close(self) -> None:
        pass


def noop_context(tmp_path: Path, spec: str = "noop:a", **timing: float) -> Any:
    """A worker's context for no-op device `spec` on the SQLite farm in `tmp_path`, its
    messages kept by a RecordingDispatcher (worker_agent.consumer.ConsumerContext)."""
    from farm_core.settings import Timing
    from worker_agent.consumer import ConsumerContext
    from worker_agent.discovery import noop_device

    ctx = ConsumerContext(
        noop_device(spec, "h"),
        f"sqlite:///{tmp_path / 'farm.db'}",
        "unused://",
        "w1",
        timing=Timing(**timing),
        cache_dir=tmp_path / "cache",
    )
    ctx.__dict__["dispatcher"] = RecordingDispatcher()
    return ctx


def sqlite_engine(folder: Path) -> Engine:
    return open_database(f"sqlite:///{folder / 'farm.db'}")


def finish_jobs(
    engine: Engine,
    failed: frozenset[tuple[str, str]] = frozenset(),
    avg_us: float = 2000.0,
    error: str = "ToolOutputError: no result",
) -> None:
    """End every job of the farm as a worker would: those whose (device, config) is in
    `failed` failed with `error`, the rest succeeded at `avg_us`."""
    from sqlalchemy import select

    from farm_core import jobs
    from farm_core.schema import FAILED, SUCCEEDED, Job

    with engine.begin() as c:
        ids = c.execute(select(Job.id, Job.device_key, Job.config)).all()
    for job_id, device, config in ids:
        bad = (device, config) in failed
        with engine.begin() as c:
            jobs.claim(c, job_id, 1, "w", 60)
            values = {"error": error} if bad else {"avg_us": avg_us}
            jobs.finish(c, job_id, 1, "w", FAILED if bad else SUCCEEDED, values)


def converter_named_model(path: Path, output: str = "y") -> Path:
    """y = x * 2 on (1, 4) floats whose input is named as the TFLite converter names it
    (`serving_default_input_1:0`)."""
    import numpy as np

    from delegate_runtime.builder import ModelBuilder

    b = ModelBuilder()
    g = b.main
    x = g.input("serving_default_input_1:0", (1, 4), np.float32)
    y = g.tensor(output, (1, 4), np.float32)
    g.op("MUL", [x, g.const("w", np.full((1, 4), 2.0, np.float32))], [y])
    g.output(y)
    path.write_bytes(b.build())
    return path


def lost_device_farm(engine: Engine, tmp_path: Path, jobs_count: int, others: int) -> Engine:
    """`jobs_count` queued jobs on noop:lost, which went silent, and `others` devices of
    the same hardware that its campaign's selector matches, in `engine`'s new database;
    the jobs waited past the dispatch grace."""
    from sqlalchemy import update

    from farm_core.schema import QUEUED, Campaign, Device, Job, utcnow
    from orchestrator.submit import submit

    add_device(engine, "noop:lost")
    for i in range(others):
        add_device(engine, f"noop:o{i}")
    models = [write_model(tmp_path / f"m{i}.tflite", scale=1.0 + i) for i in range(jobs_count)]
    submit(engine, RecordingDispatcher(), models, "key=noop:lost", "cpu")
    with engine.begin() as c:
        c.execute(update(Campaign).values(selector="kind=noop"))
        c.execute(update(Job).values(state=QUEUED, updated_at=utcnow() - timedelta(seconds=1)))
        silent = utcnow() - timedelta(seconds=60)
        c.execute(update(Device).where(Device.key == "noop:lost").values(last_seen=silent))
    return engine
