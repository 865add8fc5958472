"""A PostgreSQL database of its own for a bench: made, filled with no-op devices, dropped."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, text

from farm_core.database import open_database
from farm_core.schema import Device, utcnow

#: The local server (trust auth), as the tests and CI run it.
LOCAL_SERVER = "postgresql+psycopg2://postgres:postgres@127.0.0.1:5432"


@contextmanager
def scratch_database(prefix: str, devices: int = 0, server: str = LOCAL_SERVER) -> Iterator[str]:
    """A new database on `server` with the farm's schema and `devices` online no-op devices
    (noop:d0000, noop:d0001, ...); its URL. Dropped after, connections and all."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    admin = create_engine(f"{server}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    url = f"{server}/{name}"
    try:
        engine = open_database(url)
        now = utcnow()
        rows = [
            {"key": f"noop:d{i:04d}", "kind": "noop", "last_seen": now,
             "registered_at": now, "state": "online"}
            for i in range(devices)
        ]  # fmt: skip
        if rows:
            with engine.begin() as c:
                c.execute(Device.__table__.insert(), rows)
        engine.dispose()
        yield url
    finally:
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
