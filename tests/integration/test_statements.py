"""A worker's claim-and-finish connection (farm_core.database.Statements) on PostgreSQL: one
connection kept for every use, in autocommit, replaced when the server dropped it."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import ProgrammingError

from farm_core.database import Statements, make_engine, transaction_block

PID = text("SELECT pg_backend_pid()")


def test_one_connection_serves_every_use_and_each_statement_commits(pg_session_url) -> None:
    engine = make_engine(pg_session_url)
    statements = Statements(engine)
    try:
        first = statements.run(lambda c: c.execute(PID).scalar())
        statements.run(lambda c: c.execute(text("CREATE TEMP TABLE t (x int)")))
        statements.run(lambda c: c.execute(text("INSERT INTO t VALUES (1)")))
        assert statements.run(lambda c: c.execute(PID).scalar()) == first
        with engine.connect() as other:  # not in a transaction: another session may look
            state = other.execute(
                text("SELECT state FROM pg_stat_activity WHERE pid = :p"), {"p": first}
            ).scalar()
        assert state == "idle"
        assert statements.run(lambda c: c.execute(text("SELECT x FROM t")).scalar()) == 1
    finally:
        statements.close()
        engine.dispose()


def test_a_dropped_connection_is_replaced_and_the_work_replayed(pg_session_url) -> None:
    engine = make_engine(pg_session_url)
    statements = Statements(engine)
    try:
        first = statements.run(lambda c: c.execute(PID).scalar())
        with engine.connect() as admin:
            admin.execute(text("SELECT pg_terminate_backend(:p)"), {"p": first})
            admin.commit()
        again = statements.run(lambda c: c.execute(PID).scalar())
        assert again != first
    finally:
        statements.close()
        engine.dispose()


def test_a_failed_statement_leaves_the_next_use_a_working_connection(pg_session_url) -> None:
    engine = make_engine(pg_session_url)
    statements = Statements(engine)
    try:
        with pytest.raises(ProgrammingError):
            statements.run(lambda c: c.execute(text("SELECT * FROM no_such_table")))
        assert statements.run(lambda c: c.execute(text("SELECT 1")).scalar()) == 1
    finally:
        statements.close()
        engine.dispose()


def test_a_transaction_block_holds_its_lock_across_autocommit_statements(
    pg_session_url,
) -> None:
    engine = make_engine(pg_session_url)
    statements = Statements(engine)
    locks = text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242")

    def locked_twice(conn) -> list[int]:
        seen = []
        with transaction_block(conn):
            conn.execute(text("SELECT pg_advisory_xact_lock(4242)"))
            with engine.connect() as other:
                seen.append(other.execute(locks).scalar())
            conn.execute(text("SELECT 1"))  # a second statement: still in the block
            with engine.connect() as other:
                seen.append(other.execute(locks).scalar())
        return seen

    try:
        assert statements.run(locked_twice) == [1, 1]
        with engine.connect() as other:
            assert other.execute(locks).scalar() == 0  # released at the block's end
    finally:
        statements.close()
        engine.dispose()


def _isolation_switches(engine, uses: int) -> int:
    """How often the dialect switched a connection's isolation level over `uses` borrowed
    (hold=False) uses of a Statements on `engine`, after a first that opened the pool's
    connection (an engine made autocommit sets it once, as it connects)."""
    calls = []
    original = engine.dialect.set_isolation_level

    def counting(dbapi_conn, level):  # type: ignore[no-untyped-def]
        calls.append(level)
        return original(dbapi_conn, level)

    engine.dialect.set_isolation_level = counting
    statements = Statements(engine, hold=False)
    try:
        statements.run(lambda c: c.execute(PID))
        calls.clear()
        for _ in range(uses):
            assert statements.run(lambda c: c.connection.dbapi_connection.autocommit)
    finally:
        statements.close()
        engine.dispose()
    return len(calls)


def test_a_groups_borrowed_connections_stay_in_autocommit_between_uses(pg_session_url) -> None:
    # a group's devices borrow a connection per statement: from an engine made autocommit
    # it is never switched to autocommit and back (about 0.1 ms a use); from a plain one,
    # twice a use
    assert _isolation_switches(make_engine(pg_session_url, autocommit=True), 5) == 0
    assert _isolation_switches(make_engine(pg_session_url), 5) == 10
