"""The farm's service URLs checked before any work (farm_core.service_urls), a broker
reached once with a short timeout (farm_core.reach), and PostgreSQL's connect timeout."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from delegate_runtime.errors import JobError, UsageError
from farm_core import service_urls
from farm_core.reach import reach_broker
from tests.support.farm import free_port


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "farm.db").write_bytes(service_urls.SQLITE_MAGIC + b"\0" * 84)
    (tmp_path / "empty.db").touch()
    (tmp_path / "notes.txt").write_text("hello")
    return tmp_path


# -- database URLs: {d} is the folder above ---------------------------------------------------


@pytest.mark.parametrize(
    ("url", "existing", "problem"),
    [
        ("sqlite:///{d}/farm.db", True, None),
        ("sqlite:///{d}/empty.db", True, None),  # an empty file is an empty database
        ("sqlite:///{d}/typo.db", True, "no farm database {d}/typo.db"),
        ("sqlite:///{d}/typo.db", False, None),  # run and db upgrade create it
        ("sqlite:///{d}/no/farm.db", False, "cannot create {d}/no/farm.db: folder {d}/no"),
        ("sqlite:///{d}", True, "{d} is a directory, not a SQLite database file"),
        ("sqlite:///{d}/notes.txt", True, "{d}/notes.txt is not a SQLite database"),
        ("sqlite://", True, "an in-memory SQLite database holds no farm"),
        ("bogus://x", False, "bad database URL 'bogus://x': Can't load plugin"),
        ("notaurl", False, "bad database URL 'notaurl': Could not parse"),
        ("postgresql://u:secret@db.invalid/farm", True, None),  # reached when opened
        ("postgres://u:secret@db/farm", True, "bad database URL 'postgres://u:***@db/farm'"),
    ],
)
def test_database_problem(folder: Path, url: str, existing: bool, problem: str | None) -> None:
    got = service_urls.database_problem(url.format(d=folder), existing)
    if problem is None:
        assert got is None
    else:
        assert got is not None and problem.format(d=folder) in got
        assert "secret" not in got


# -- broker URLs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("redis://h:6379/0", None),
        ("rediss://:pw@h:6380/0", None),
        ("redis+socket:///run/redis.sock", None),
        ("filesystem://{d}/broker", None),  # made by the command, in a folder that exists
        ("notaurl", "expected SCHEME://"),
        ("amqp://guest@h:5672//", "no transport for 'amqp'"),
        ("memory://", "no transport for 'memory'"),
        ("redis://", "no host"),
        ("redis://h:port/0", "Port could not be cast"),
        ("filesystem://{d}/no/broker", "folder {d}/no does not exist"),
        ("filesystem://{d}/notes.txt", "{d}/notes.txt is not a folder"),
        ("bogus://:secret@h", "bad broker URL 'bogus://:***@h'"),
    ],
)
def test_broker_problem(folder: Path, url: str, problem: str | None) -> None:
    got = service_urls.broker_problem(url.format(d=folder))
    if problem is None:
        assert got is None
    else:
        assert got is not None and problem.format(d=folder) in got
        assert "secret" not in got


# -- the environment's values: UsageError naming the variable ---------------------------------


@pytest.mark.parametrize(
    ("env", "call", "message"),
    [
        ({"DEVICEFARM_DB": "sqlite:///{d}/typo.db"}, "db", "$DEVICEFARM_DB: no farm database"),
        (
            {"DEVICEFARM_HOME": "{d}/fresh"},
            "db",
            "no farm in {d}/fresh (the farm's home: --home DIR, $DEVICEFARM_HOME",
        ),
        ({"DEVICEFARM_BROKER": "amqp://x"}, "broker", "$DEVICEFARM_BROKER: bad broker URL"),
    ],
)
def test_the_environments_values_are_checked(
    folder: Path, monkeypatch: pytest.MonkeyPatch, env: dict, call: str, message: str
) -> None:
    for var in ("DEVICEFARM_DB", "DEVICEFARM_BROKER", "DEVICEFARM_HOME"):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value.format(d=folder))
    check = service_urls.default_db if call == "db" else service_urls.default_broker
    with pytest.raises(UsageError) as refused:
        check()
    assert message.format(d=folder) in str(refused.value)
    assert not (folder / "fresh").exists()


def test_a_farm_to_create_may_be_missing(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEVICEFARM_DB", raising=False)
    monkeypatch.setenv("DEVICEFARM_HOME", str(folder / "fresh"))
    assert service_urls.default_db(existing=False) == f"sqlite:///{folder / 'fresh' / 'farm.db'}"


# -- reaching a broker once, with a short timeout ---------------------------------------------


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port that accepts connections and never answers (a firewall's black hole)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


def test_a_refused_broker_is_one_error_at_once() -> None:
    start = time.monotonic()
    with pytest.raises(JobError, match=r"cannot reach the broker redis://127\.0\.0\.1:\d+/0"):
        reach_broker(f"redis://127.0.0.1:{free_port()}/0")
    assert time.monotonic() - start < 2


def test_a_broker_that_never_answers_is_given_up_on(silent_server: int) -> None:
    start = time.monotonic()
    with pytest.raises(JobError, match=r"waited at most 0\.5 s"):
        reach_broker(f"redis://:secret@127.0.0.1:{silent_server}/0", timeout_s=0.5)
    assert time.monotonic() - start < 3


def test_the_password_is_never_shown(silent_server: int) -> None:
    with pytest.raises(JobError) as refused:
        reach_broker(f"redis://:secret@127.0.0.1:{silent_server}/0", timeout_s=0.2)
    assert "secret" not in str(refused.value) and ":***@" in str(refused.value)


def test_a_filesystem_broker_has_nothing_to_reach(tmp_path: Path) -> None:
    reach_broker(f"filesystem://{tmp_path / 'broker'}")
    assert not (tmp_path / "broker").exists()


def test_postgresql_gives_up_on_a_server_that_never_answers(
    silent_server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """libpq would wait on the network for minutes; make_engine gives it a connect timeout
    (2 s here: libpq's least)."""
    pytest.importorskip("psycopg2")
    from farm_core import database

    monkeypatch.setattr(database, "CONNECT_TIMEOUT_S", 2)
    engine = database.make_engine(f"postgresql://u@127.0.0.1:{silent_server}/farm")
    start = time.monotonic()
    with pytest.raises(JobError, match="cannot reach the database"):
        database.current_revision(engine)
    assert time.monotonic() - start < 10
