"""What fills of device queues serialise on PostgreSQL (farm_core.fill_locks): fills of
different devices run at once; two fills of one device, a fill of several devices and any
other, and two fills that may send one capped project's jobs wait for each other."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy import Connection, text
from sqlalchemy.exc import OperationalError

from farm_core import fill_locks
from farm_core.database import make_engine

Take = Callable[[Connection], None]


def devices(*keys: str) -> Take:
    return lambda conn: fill_locks.lock_devices(conn, sorted(keys))


def device_and_projects(key: str, *projects: str) -> Take:
    def take(conn: Connection) -> None:
        fill_locks.lock_devices(conn, [key])
        fill_locks.lock_projects(conn, projects)

    return take


def waits(url: str, first: Take, second: Take) -> bool:
    """Whether `second`, in another transaction, waits while `first`'s transaction holds
    what it took."""
    engine = make_engine(url)
    try:
        with engine.connect() as a, engine.connect() as b, a.begin():
            first(a)
            with b.begin():
                b.execute(text("SET LOCAL lock_timeout = '300ms'"))
                try:
                    second(b)
                except OperationalError as exc:
                    assert "lock timeout" in str(exc)
                    return True
                return False
    finally:
        engine.dispose()


CASES = {
    "two devices": (devices("noop:a"), devices("noop:b"), False),
    "one device twice": (devices("noop:a"), devices("noop:a"), True),
    "a device, then several": (devices("noop:a"), devices("noop:b", "noop:c"), True),
    "several, then a device": (devices("noop:b", "noop:c"), devices("noop:z"), True),
    "one capped project": (
        device_and_projects("noop:a", "vision"),
        device_and_projects("noop:b", "vision"),
        True,
    ),
    "two capped projects": (
        device_and_projects("noop:a", "vision"),
        device_and_projects("noop:b", "audio"),
        False,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_fills_wait_only_for_what_they_share(pg_session_url: str, case: str) -> None:
    first, second, expected = CASES[case]
    assert waits(pg_session_url, first, second) == expected


def test_the_locks_end_with_the_fills_transaction(pg_session_url: str) -> None:
    engine = make_engine(pg_session_url)
    try:
        with engine.begin() as conn:
            device_and_projects("noop:a", "vision")(conn)
    finally:
        engine.dispose()
    assert not waits(pg_session_url, devices("noop:x"), device_and_projects("noop:a", "vision"))
