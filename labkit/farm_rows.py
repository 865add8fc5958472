"""Farm state on demand: a device row as an agent registers it, a tiny valid model."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, insert

from farm_core.schema import Device, utcnow


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
