"""Engines and transactions for the farm's database (SQLite or PostgreSQL).

SQLite is shared by several processes in the embedded mode: it runs in WAL mode, and every
transaction starts with BEGIN IMMEDIATE so that a writer waits for the lock (busy timeout)
instead of failing when it upgrades a read to a write.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError
from sqlalchemy.pool import NullPool

from delegate_runtime.errors import JobError

SQLITE_BUSY_TIMEOUT_MS = 60_000
POOL_RECYCLE_S = 1800
T = TypeVar("T")
MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def _sqlite_pragmas(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA journal_mode = WAL")
        cur.execute("PRAGMA synchronous = NORMAL")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def _postgres_driver() -> str:
    """SQLAlchemy 2.1 defaults to psycopg 3; fall back to psycopg2 (the `farm` extra)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "postgresql+psycopg2"
    return "postgresql+psycopg"


def make_engine(url: str, durable: bool = True) -> Engine:
    """An engine for `url`; SQLite files get their folder created and safe pragmas.

    `durable=False` (worker agents) lets PostgreSQL acknowledge commits before their WAL
    is flushed: a server crash may then lose the last fraction of a second of claims and
    results, which the reconciler repairs like any lost message (every worker-side write is
    a compare-and-set that can be replayed), and each job saves two flush waits.
    """
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise JobError(f"bad database URL {url!r}: {exc}") from exc
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername=_postgres_driver())
        url = parsed.render_as_string(hide_password=False)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        # NullPool: a connection never crosses a fork (Celery's prefork children)
        engine = create_engine(url, poolclass=NullPool)
        _sqlite_pragmas(engine)
        return engine
    # no pre-ping (a round trip per checkout): `retrying` replays a transaction once when
    # its pooled connection turns out to be dead
    engine = create_engine(url, pool_size=5, max_overflow=5, pool_recycle=POOL_RECYCLE_S)
    if not durable and parsed.get_backend_name() == "postgresql":

        @event.listens_for(engine, "connect")
        def _relaxed(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("SET synchronous_commit = off")
            cur.close()
            dbapi_conn.commit()

    return engine


@contextmanager
def statements(engine: Engine) -> Iterator[Connection]:
    """A connection for work made only of single-statement compare-and-sets (the claim,
    and on PostgreSQL the finish): autocommit on PostgreSQL, saving a round trip per
    statement; a transaction elsewhere."""
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            yield conn
    else:
        with engine.begin() as conn:
            yield conn


def retrying(engine: Engine, fn: Callable[[Connection], T]) -> T:
    """`fn(conn)` on `statements(engine)`, replayed once if the connection was found dead."""
    try:
        with statements(engine) as conn:
            return fn(conn)
    except DBAPIError as exc:
        if not exc.connection_invalidated:
            raise
    with statements(engine) as conn:
        return fn(conn)


@contextmanager
def transaction(engine: Engine) -> Iterator[Connection]:
    """A connection in a transaction, committed on success and rolled back on error."""
    with engine.begin() as conn:
        yield conn


def migrate(engine: Engine) -> None:
    """Bring the database's schema to the newest migration (creates it when empty)."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    try:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
    except OperationalError as exc:
        raise JobError(f"cannot reach the database {engine.url!r}: {exc.orig}") from exc


def open_database(url: str, upgrade: bool = True) -> Engine:
    """An engine for `url`, migrated to head unless `upgrade` is false."""
    engine = make_engine(url)
    if upgrade:
        migrate(engine)
    return engine
