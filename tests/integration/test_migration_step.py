"""The migration runs once, as its own step (issue 17): `devicefarm db upgrade`.

The distributed processes (worker, reconciler, dashboard) never migrate: on a database
that is empty or behind they exit 1 with one line naming `devicefarm db upgrade`, and leave
the schema as it was. The embedded `devicefarm run` still migrates its own SQLite file.
Each case gets a fresh, empty PostgreSQL database; Alembic itself says the revision.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from delegate_runtime.examples import scaled_model
from farm_core.database import MIGRATIONS_DIR, head_revision, make_engine
from tests.integration.conftest import new_pg_database
from tests.support.farm import free_port

REPO = Path(__file__).resolve().parents[2]
HINT = "devicefarm db upgrade"
#: The oldest revision: a database a previous release left behind.
OLD_REVISION = "0001"


def devicefarm(*args: str, home: Path, timeout_s: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DEVICEFARM_DB", "DEVICEFARM_BROKER")}
    env["DEVICEFARM_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "devicefarm.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=REPO,
        env=env,
        check=False,
    )


def revision(url: str) -> str | None:
    """The revision as Alembic reads it (None: never migrated)."""
    from alembic.runtime.migration import MigrationContext

    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


def tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def alembic_upgrade(url: str, target: str) -> None:
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    engine = make_engine(url)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, target)
    engine.dispose()


@pytest.fixture
def empty_db() -> Iterator[str]:
    """A new PostgreSQL database with nothing in it, dropped afterwards."""
    with new_pg_database("devicefarm_migrate") as url:
        yield url


def server_args(command: str, redis_url: str) -> list[str]:
    if command == "worker":
        return ["worker", "--broker", redis_url, "--devices", "noop:a", "--no-canary"]
    if command == "reconcile":
        return ["reconcile", "--broker", redis_url]
    return ["dashboard", "--port", str(free_port())]


def assert_refused(r: subprocess.CompletedProcess, *fragments: str) -> None:
    assert r.returncode == 1, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    for fragment in (HINT, *fragments):
        assert fragment in lines[0], lines[0]


@pytest.mark.parametrize("command", ["worker", "reconcile", "dashboard"])
def test_an_empty_database_is_refused_not_migrated(
    command: str, empty_db: str, redis_url: str, tmp_path: Path
) -> None:
    r = devicefarm(*server_args(command, redis_url), "--db", empty_db, home=tmp_path)
    assert_refused(r, "has no schema")
    assert revision(empty_db) is None and tables(empty_db) == set()


@pytest.mark.parametrize("command", ["worker", "reconcile", "dashboard"])
def test_a_database_behind_is_refused_not_migrated(
    command: str, empty_db: str, redis_url: str, tmp_path: Path
) -> None:
    alembic_upgrade(empty_db, OLD_REVISION)
    r = devicefarm(*server_args(command, redis_url), "--db", empty_db, home=tmp_path)
    assert_refused(r, f"at revision {OLD_REVISION}, behind {head_revision()}")
    assert revision(empty_db) == OLD_REVISION


def test_a_database_newer_than_the_code_is_refused(
    empty_db: str, redis_url: str, tmp_path: Path
) -> None:
    alembic_upgrade(empty_db, "head")
    engine = make_engine(empty_db)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    r = devicefarm("reconcile", "--broker", redis_url, "--db", empty_db, home=tmp_path)
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "at revision 9999, newer than this devicefarm knows" in r.stderr


def test_db_upgrade_then_the_reconciler_runs(empty_db: str, redis_url: str, tmp_path: Path) -> None:
    up = devicefarm("db", "upgrade", "--db", empty_db, home=tmp_path)
    assert up.returncode == 0, up.stderr
    assert revision(empty_db) == head_revision()
    r = devicefarm("reconcile", "--broker", redis_url, "--db", empty_db, home=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "reconcile: nothing to do"


def test_the_embedded_run_migrates_its_own_sqlite(tmp_path: Path) -> None:
    model = tmp_path / "m.tflite"
    model.write_bytes(scaled_model(2.0))
    home = tmp_path / "home"
    r = devicefarm("run", str(model), "--devices", "noop:a", "--runs", "1", home=home)
    assert r.returncode == 0, r.stdout + r.stderr
    assert revision(f"sqlite:///{home / 'farm.db'}") == head_revision()
