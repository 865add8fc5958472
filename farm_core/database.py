"""Engines and transactions for the farm's database (SQLite or PostgreSQL).

SQLite is shared by several processes in the embedded mode: it runs in WAL mode, and every
transaction starts with BEGIN IMMEDIATE so that a writer waits for the lock (busy timeout)
instead of failing when it upgrades a read to a write.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    InterfaceError,
    NoSuchModuleError,
    OperationalError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.pool import NullPool

from delegate_runtime.errors import JobError

from .db_pool import BURST, ENV_POOLER, DbPool
from .settings import CONNECT_TIMEOUT_S

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


def make_engine(
    url: str, durable: bool = True, pool: int | None = None, autocommit: bool = False
) -> Engine:
    """An engine for `url`; SQLite files get their folder created and safe pragmas.

    `durable=False` (worker agents) lets PostgreSQL acknowledge commits before their WAL
    is flushed: a server crash may then lose the last fraction of a second of claims and
    results, which the reconciler repairs like any lost message (every worker-side write is
    a compare-and-set that can be replayed), and each job saves two flush waits. It is a
    startup option of each connection, never a SET on a session a pooler might share;
    behind a transaction pooler (farm_core.db_pool) it is left to the server's role settings.

    `pool`: connections kept open between uses (default `DEVICEFARM_DB_POOL`); 0 keeps none.

    `autocommit` (PostgreSQL): every connection in autocommit from the start, for
    `Statements` only; a connection switched to it per use is switched back at its checkin
    (about 0.1 ms of a group's every claim, lease and finish).
    """
    try:
        parsed = make_url(url)
        parsed.get_dialect()  # an unknown scheme (bogus://) fails here, not in a traceback
    except (ArgumentError, NoSuchModuleError) as exc:
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
    settings = DbPool.from_env()
    size = settings.size if pool is None else pool
    # a server that does not answer is unreachable after CONNECT_TIMEOUT_S (libpq would
    # wait on the network for minutes), unless the URL sets its own connect_timeout
    connect_args: dict[str, Any] = {}
    if parsed.get_backend_name() == "postgresql":
        if "connect_timeout" not in parsed.query:
            connect_args["connect_timeout"] = CONNECT_TIMEOUT_S
        if not durable and not settings.transaction_pooler:
            given = parsed.query.get("options", "")
            given = given if isinstance(given, str) else " ".join(given)
            connect_args["options"] = f"{given} -c synchronous_commit=off".strip()
        if settings.transaction_pooler and parsed.drivername.endswith("+psycopg"):
            # psycopg 3 prepares a statement on the server after 5 runs: a pooler hands the
            # next transaction another server session, which never saw it
            connect_args["prepare_threshold"] = None
    levels = {"isolation_level": "AUTOCOMMIT"} if autocommit else {}
    if size == 0:
        return create_engine(url, poolclass=NullPool, connect_args=connect_args, **levels)
    # no pre-ping (a round trip per checkout): `retrying` replays a transaction once when
    # its pooled connection turns out to be dead
    return create_engine(
        url,
        pool_size=size,
        max_overflow=BURST,
        pool_recycle=POOL_RECYCLE_S,
        connect_args=connect_args,
        **levels,
    )


def check_worker_connection(url: str) -> None:
    """Open and close one connection as a worker's consumer would (`durable=False`);
    JobError, in one line, when a pooler refuses its startup option because
    `DEVICEFARM_DB_POOLER=transaction` is not set."""
    engine = make_engine(url, durable=False, pool=0)
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
    except OperationalError as exc:
        if "unsupported startup parameter" in str(exc.orig):
            raise JobError(
                f"the database at {engine.url.render_as_string(hide_password=True)} is "
                f"behind a pooler that refuses connection options (PgBouncer): set "
                f"{ENV_POOLER}=transaction for every farm process (docs/deploy.md)"
            ) from exc
        raise
    finally:
        engine.dispose()


class Statements:
    """A worker's work made only of single-statement compare-and-sets and reads (the claim,
    the lease, the queue's count, and on PostgreSQL the finish), on one connection kept
    open in autocommit: each statement is one round trip, and no connection is checked out
    and reset per use (0.2-0.3 ms per use, a quarter of a no-op job's claim). Elsewhere
    (SQLite) each use is a transaction of its own. A connection found dead is replaced and
    the work replayed once; one that met any other error is given back, and the next use
    takes a fresh one. Uses from several threads (the job's and its lease's) take turns.

    Autocommit keeps no transaction open between statements, so a transaction-mode pooler
    lends this connection a server session only for each statement's length.

    `hold=False` (the devices of a group process, which share one engine's small pool)
    borrows a pooled connection per use and gives it back after; from an engine made with
    `make_engine(autocommit=True)` it stays in autocommit across uses."""

    def __init__(self, engine: Engine, hold: bool = True):
        self.engine = engine
        self.hold = hold
        self._conn: Connection | None = None
        self._lock = threading.Lock()

    def run(self, fn: Callable[[Connection], T]) -> T:
        """`fn(conn)`; replayed once on a new connection if the connection was dead."""
        with self._lock:
            try:
                return self._run(fn)
            except DBAPIError as exc:
                if not exc.connection_invalidated:
                    raise
            return self._run(fn)

    def _run(self, fn: Callable[[Connection], T]) -> T:
        if self.engine.dialect.name != "postgresql":
            with self.engine.begin() as conn:
                return fn(conn)
        if self._conn is None:
            conn = self.engine.connect()
            if not conn.connection.dbapi_connection.autocommit:  # not made autocommit
                conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            self._conn = conn
        try:
            out = fn(self._conn)
            self._conn.commit()  # no round trip in autocommit; ends SQLAlchemy's autobegin
        except BaseException:
            self._close()
            raise
        if not self.hold:
            self._close()  # back to the pool
        return out

    def close(self) -> None:
        """Give the connection back (the next use opens another)."""
        with self._lock:
            self._close()

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):  # a dead one is discarded by the pool
                conn.close()


@contextmanager
def transaction_block(conn: Connection) -> Iterator[None]:
    """The block as one transaction on `conn`, also when `conn` is in autocommit
    (`Statements`): then an explicit BEGIN and COMMIT (ROLLBACK on error), so that a
    transaction-scoped lock holds for the whole block and a pooler keeps the block on one
    server session. Elsewhere the block runs in the caller's transaction (SQLite's is
    BEGIN IMMEDIATE: one writer at a time already)."""
    if conn.dialect.name != "postgresql" or not conn.connection.dbapi_connection.autocommit:
        yield
        return
    conn.exec_driver_sql("BEGIN")
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            conn.exec_driver_sql("ROLLBACK")
        raise
    conn.exec_driver_sql("COMMIT")


#: PEP 249 exception classes that mean the connection, not the statement, failed.
_CONNECTION_ERRORS = frozenset({"OperationalError", "InterfaceError"})


def unreachable(exc: BaseException) -> bool:
    """True for errors that say the database is unreachable, not that a statement is wrong:
    SQLAlchemy's wrappers and the driver's own (raised unwrapped from a connection reset),
    and a pool that had no connection to lend in time (a group's devices share one)."""
    if isinstance(exc, OperationalError | InterfaceError | PoolTimeout):
        return True
    if isinstance(exc, DBAPIError):
        return exc.connection_invalidated
    return any(c.__name__ in _CONNECTION_ERRORS for c in type(exc).__mro__)


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
        first = str(exc.orig).strip().splitlines()[0] if str(exc.orig).strip() else ""
        raise JobError(f"cannot reach the database {engine.url!r}: {first}") from exc


def current_revision(engine: Engine) -> str | None:
    """The database's migration revision; None for a database never migrated."""
    from alembic.runtime.migration import MigrationContext

    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    except OperationalError as exc:
        first = str(exc.orig).strip().splitlines()[0] if str(exc.orig).strip() else ""
        raise JobError(f"cannot reach the database {engine.url!r}: {first}") from exc


#: What a distributed process says when the schema is not the one its code needs.
UPGRADE_HINT = "run `devicefarm db upgrade` (once, as its own step) first"


def _scripts() -> Any:
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(MIGRATIONS_DIR))


def head_revision() -> str:
    """The newest migration this code knows."""
    head = _scripts().get_current_head()
    assert head, "no migrations"
    return head


def require_current(engine: Engine) -> None:
    """JobError, in one line, unless the database is at `head_revision()`.

    Distributed processes (worker, reconciler, dashboard, API) call this instead of
    migrating: the migration runs once, as its own step (`devicefarm db upgrade`)."""
    have, need = current_revision(engine), head_revision()
    if have == need:
        return
    where = engine.url.render_as_string(hide_password=True)
    if have is None:
        raise JobError(
            f"the database {where} has no schema (needs revision {need}): {UPGRADE_HINT}"
        )
    if have not in {s.revision for s in _scripts().walk_revisions()}:
        raise JobError(
            f"the database {where} is at revision {have}, newer than this devicefarm knows "
            f"(its newest is {need}): upgrade devicefarm on this host"
        )
    raise JobError(f"the database {where} is at revision {have}, behind {need}: {UPGRADE_HINT}")


def open_current(url: str, durable: bool = True) -> Engine:
    """An engine for `url`, checked to be at the newest revision (never migrated here)."""
    engine = make_engine(url, durable=durable)
    try:
        require_current(engine)
    except BaseException:
        engine.dispose()
        raise
    return engine


def is_local_file(url: str) -> bool:
    """Whether `url` is a SQLite database (the embedded farm's own file), or not a URL at
    all (make_engine then names the mistake)."""
    try:
        return make_url(url).get_backend_name() == "sqlite"
    except ArgumentError:
        return True


def open_farm(url: str, durable: bool = True) -> Engine:
    """The farm database for a command or service: a local SQLite file is migrated here (the
    embedded default needs no set-up step); a server database must already be at head,
    which `devicefarm db upgrade` brings it to, once, as its own step."""
    if is_local_file(url):
        engine = make_engine(url, durable=durable)
        migrate(engine)
        return engine
    return open_current(url, durable=durable)


def open_database(url: str, upgrade: bool = True) -> Engine:
    """An engine for `url`, migrated to head unless `upgrade` is false."""
    engine = make_engine(url)
    if upgrade:
        migrate(engine)
    return engine
