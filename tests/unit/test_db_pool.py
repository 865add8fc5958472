"""The database connection settings (farm_core.db_pool) and the engines they shape."""

from __future__ import annotations

import pytest
from sqlalchemy import event
from sqlalchemy.pool import NullPool, QueuePool

from delegate_runtime.errors import UsageError
from farm_core.database import make_engine
from farm_core.db_pool import BURST, DbPool

URL = "postgresql+psycopg2://farm@127.0.0.1:1/farm"  # never connected to here


class _Caught(Exception):
    pass


def test_defaults_and_overrides(monkeypatch) -> None:
    monkeypatch.delenv("DEVICEFARM_DB_POOL", raising=False)
    monkeypatch.delenv("DEVICEFARM_DB_POOLER", raising=False)
    assert DbPool.from_env() == DbPool(2, "none")
    monkeypatch.setenv("DEVICEFARM_DB_POOL", "0")
    monkeypatch.setenv("DEVICEFARM_DB_POOLER", "Transaction")
    settings = DbPool.from_env()
    assert settings == DbPool(0, "transaction") and settings.transaction_pooler


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("DEVICEFARM_DB_POOL", "two", "not a whole number"),
        ("DEVICEFARM_DB_POOL", "-1", "from 0 to 1000"),
        ("DEVICEFARM_DB_POOLER", "statement", "choose one of none, session, transaction"),
    ],
)
def test_a_bad_value_is_refused_by_name(monkeypatch, name, value, says) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(UsageError, match=f"{name}.*{says}"):
        DbPool.from_env()


def test_the_setting_bounds_what_an_engine_keeps(monkeypatch) -> None:
    monkeypatch.setenv("DEVICEFARM_DB_POOL", "3")
    engine = make_engine(URL)
    assert isinstance(engine.pool, QueuePool)
    assert engine.pool.size() == 3 and engine.pool._max_overflow == BURST
    assert isinstance(make_engine(URL, pool=0).pool, NullPool)  # a device's consumer


def test_relaxed_commits_travel_as_a_startup_option_unless_a_pooler_is_in_front(
    monkeypatch,
) -> None:
    def options(url: str) -> str | None:
        """The `options` the driver would be called with (caught before it connects)."""
        engine, seen = make_engine(url, durable=False), {}

        @event.listens_for(engine, "do_connect")
        def _catch(_dialect, _record, _args, params) -> None:
            seen.update(params)
            raise _Caught

        with pytest.raises(_Caught):
            engine.connect()
        return seen.get("options")

    monkeypatch.delenv("DEVICEFARM_DB_POOLER", raising=False)
    assert options(URL) == "-c synchronous_commit=off"
    assert options(URL + "?options=-c%20work_mem%3D64MB") == (
        "-c work_mem=64MB -c synchronous_commit=off"
    )
    monkeypatch.setenv("DEVICEFARM_DB_POOLER", "transaction")
    assert options(URL) is None
