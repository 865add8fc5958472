"""Migrations 0012 and 0013 make the kept_evidence table exactly as farm_core.schema
declares it (a row per scope, model and version), on SQLite and PostgreSQL, and their
downgrades undo them; of two processes storing one version at once, one stores it and the
other's is dropped, not an error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, inspect

from farm_core.database import MIGRATIONS_DIR, make_engine
from farm_core.schema import Base
from tests.integration.conftest import new_pg_database


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    if request.param == "sqlite":
        engine = make_engine(f"sqlite:///{tmp_path / 'farm.db'}")
        yield engine
        engine.dispose()
        return
    with new_pg_database("devicefarm_kept") as url:
        engine = make_engine(url)
        yield engine
        engine.dispose()


def migrate(engine: Engine, to: str, down: bool = False) -> None:
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        (command.downgrade if down else command.upgrade)(cfg, to)


def test_0013_makes_the_declared_table_and_the_downgrades_undo_it(engine: Engine) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    migrate(engine, "0013")
    with engine.connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert [d for d in diffs if "kept_evidence" in repr(d)] == []
    columns = {c["name"] for c in inspect(engine).get_columns("kept_evidence")}
    assert columns == {"scope", "model", "version", "data", "size_bytes", "read_at"}
    key = inspect(engine).get_pk_constraint("kept_evidence")["constrained_columns"]
    assert key == ["scope", "model", "version"]
    migrate(engine, "0012", down=True)
    key = inspect(engine).get_pk_constraint("kept_evidence")["constrained_columns"]
    assert key == ["scope", "version"]
    migrate(engine, "0011", down=True)
    assert "kept_evidence" not in inspect(engine).get_table_names()


def test_two_processes_storing_one_version_at_once_keep_one_row(engine: Engine) -> None:
    import threading
    from datetime import timedelta

    from sqlalchemy import func, select

    from dashboard import evidence_store
    from farm_core.schema import KeptEvidence, utcnow
    from orchestrator.allowlist.collect import Gathered

    migrate(engine, "head")
    gathered, versions, at = Gathered({"sha": "m.tflite"}, {"sha": []}), {"sha": ("v", 1)}, utcnow()
    models = ["sha"]
    start, stored = threading.Barrier(2), []

    def store() -> None:
        start.wait(10)
        stored.append(evidence_store.store(engine, None, versions, gathered, at))

    threads = [threading.Thread(target=store) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(stored) == [0, 1]  # insert-if-absent: the second one is dropped
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(KeptEvidence)).scalar_one() == 1
    assert evidence_store.load(engine, None, versions) == {"sha": (gathered, at)}
    # a fresh process at a later version shows it while it is recent (dashboard.cache)
    since = at - timedelta(seconds=1)
    assert evidence_store.newest(engine, None, since, models) == {"sha": (gathered, at)}
    assert evidence_store.newest(engine, None, at + timedelta(seconds=1), models) == {}
    assert evidence_store.newest(engine, ("other",), since, models) == {}
    assert evidence_store.newest(engine, None, since, ["other"]) == {}
