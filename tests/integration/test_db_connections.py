"""PostgreSQL connections a host's agent holds (issue 44): its own small pool
(`DEVICEFARM_DB_POOL`), and none for a device whose queue ran dry; the workers' relaxed
commits are a startup option of their connections, left out behind a transaction pooler."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from farm_core.database import make_engine
from farm_core.schema import SUCCEEDED
from tests.integration.conftest import PG_ADMIN_URL
from tests.support.farm import wait_until

pytestmark = pytest.mark.integration


def sessions_on(database: str) -> int:
    """Server sessions connected to `database` now (seen from another database)."""
    admin = create_engine(
        PG_ADMIN_URL.replace("postgresql://", "postgresql+psycopg2://", 1),
        isolation_level="AUTOCOMMIT",
    )
    try:
        with admin.connect() as conn:
            return conn.execute(
                text("SELECT count(*) FROM pg_stat_activity WHERE datname = :d"),
                {"d": database},
            ).scalar_one()
    finally:
        admin.dispose()


def test_devices_hold_no_connection_once_their_campaign_is_done(
    farm, start_agent, models, monkeypatch
) -> None:
    monkeypatch.setenv("DEVICEFARM_DB_POOL", "1")  # the agent's pool
    database = make_url(farm.db_url).database
    assert database
    devices = [f"noop:held{i}" for i in range(4)]
    start_agent("C", devices, farm.db_url, farm.broker_url)
    sub = farm.submit(models(3), "kind=noop", "cpu")
    assert {j.state for j in farm.wait_done(sub.campaign_id)} == {SUCCEEDED}
    farm.engine.dispose()  # this test's own
    # before: the agent's 2 and 2 per device, kept until the agent stopped
    assert wait_until(lambda: sessions_on(database) <= 1, 10, "the devices' connections")


def test_relaxed_commits_are_a_startup_option_left_out_behind_a_pooler(pg_url, monkeypatch) -> None:
    def synchronous_commit(durable: bool) -> str:
        engine = make_engine(pg_url, durable=durable)
        try:
            with engine.connect() as conn:
                return conn.execute(text("SHOW synchronous_commit")).scalar_one()
        finally:
            engine.dispose()

    assert synchronous_commit(durable=True) == "on"
    assert synchronous_commit(durable=False) == "off"
    monkeypatch.setenv("DEVICEFARM_DB_POOLER", "transaction")
    assert synchronous_commit(durable=False) == "on"  # the server's (role's) setting decides
