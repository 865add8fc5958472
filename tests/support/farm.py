"""Helpers for tests and benchmarks: a recording dispatcher, devices and models on demand,
free ports, and redis-servers of their own."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, insert

from farm_core.database import open_database
from farm_core.dispatch import SendOrder
from farm_core.schema import Device, utcnow


class RecordingDispatcher:
    """A dispatcher that keeps what it is asked to send (or fails, when `broken`)."""

    def __init__(self, broken: str = ""):
        self.sent: list[SendOrder] = []
        self.broken = broken

    def send(self, orders: Sequence[SendOrder]) -> tuple[list[SendOrder], str]:
        if self.broken:
            return [], self.broken
        self.sent.extend(orders)
        return list(orders), ""

    def close(self) -> None:
        pass


def sqlite_engine(folder: Path) -> Engine:
    return open_database(f"sqlite:///{folder / 'farm.db'}")


def add_device(engine: Engine, key: str, kind: str = "noop", **columns) -> None:
    """Register a device row directly (as an agent would), online now."""
    now = utcnow()
    values = {"key": key, "kind": kind, "last_seen": now, "registered_at": now, "state": "online"}
    values.update(columns)
    with engine.begin() as conn:
        conn.execute(insert(Device).values(**values))


def write_model(path: Path, scale: float = 1.0) -> Path:
    """A tiny valid model (y = x * scale) written to `path`; `scale` makes its hash differ."""
    from delegate_runtime.examples import scaled_model

    path.write_bytes(scaled_model(scale))
    return path


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


def wait_until(check: Callable[[], Any], timeout_s: float, what: str, every_s: float = 0.2) -> Any:
    """Poll `check` until it returns something truthy; AssertionError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(every_s)


#: How long a signalled process group gets to exit before SIGKILL.
STOP_GRACE_S = 5.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kill_group(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    """Signal a process started in its own session, and everything it started."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
    try:
        proc.wait(STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


class RedisServer:
    """A redis-server on a port of its own; stop/start keep the port. Without persistence
    by default; `persistent=True` keeps everything in an append-only file (fsync always)."""

    def __init__(self, port: int, workdir: Path, persistent: bool = False):
        self.port = port
        self.workdir = workdir
        self.persistent = persistent
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "yes" if self.persistent else "no",
                "--appendfsync",
                "always",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        import redis

        client = redis.Redis.from_url(self.url)
        wait_until(lambda: _ping(client), 10, "redis-server to start", 0.05)

    def stop(self) -> None:
        """Kill it: whatever it held is gone (unless persistent)."""
        if self.proc is not None:
            kill_group(self.proc)
            self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()


def _ping(client) -> bool:
    import redis

    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
