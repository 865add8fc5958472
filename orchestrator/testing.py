"""Helpers for tests and benchmarks: a recording dispatcher, devices and models on demand."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, insert

from .database import open_database
from .dispatch import SendOrder
from .schema import Device, utcnow


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
