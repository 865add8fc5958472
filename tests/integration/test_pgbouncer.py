"""The farm behind PgBouncer in transaction mode with a small server pool (issue 44): the
schema step, a campaign whose project has a quota (the claim's project lock), an agent's
consumers, results read back and the reconciler all go through the pooler, the server
never sees more sessions than the pool, and no lock outlives its transaction.

A missing pgbouncer skips locally and fails in CI (CI=true).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from farm_core import quotas
from farm_core.schema import SUCCEEDED
from tests.conftest import require
from tests.integration.conftest import PG_ADMIN_URL, REPO, Farm, new_pg_database
from tests.support.farm import free_port, wait_until

pytestmark = pytest.mark.integration

#: Server sessions PgBouncer may open to the farm's database.
POOL = 5
DEVICES = 8
#: Debian's package runs it as this user; PgBouncer refuses to run as root.
RUN_AS = "postgres"
#: Where Debian installs it (outside a user's PATH).
BINARY = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/usr/local/sbin")


class PgBouncer:
    """A pgbouncer of our own, in transaction mode, in front of the test PostgreSQL."""

    def __init__(self, folder: Path, port: int):
        self.folder, self.port = folder, port
        self.server = make_url(PG_ADMIN_URL)
        self.proc: subprocess.Popen | None = None

    def url(self, database: str) -> str:
        """A farm URL for `database` through this pooler."""
        user, password = self.server.username or "postgres", self.server.password or ""
        auth = f"{user}:{password}" if password else user
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        s = self.server
        target = f"host={s.host or '127.0.0.1'} port={s.port or 5432}"
        user, password = s.username or "postgres", s.password or ""
        (self.folder / "users.txt").write_text(f'"{user}" "{password}"\n')
        (self.folder / "pgbouncer.ini").write_text(
            f"""[databases]
* = {target}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {self.folder / "users.txt"}
pool_mode = transaction
default_pool_size = {POOL}
max_db_connections = {POOL}
reserve_pool_size = 0
max_client_conn = 500
admin_users = {user}
logfile = {self.folder / "pgbouncer.log"}
pidfile = {self.folder / "pgbouncer.pid"}
"""
        )
        cmd = [BINARY or "pgbouncer"]
        if os.geteuid() == 0:
            shutil.chown(self.folder, RUN_AS)
            cmd += ["-u", RUN_AS]
        with (self.folder / "stderr.txt").open("w") as err:
            self.proc = subprocess.Popen(
                [*cmd, str(self.folder / "pgbouncer.ini")], stdout=err, stderr=err
            )
        wait_until(self._up, 20, "pgbouncer to listen")

    def _up(self) -> bool:
        import socket

        if self.proc is not None and self.proc.poll() is not None:
            said = [f.read_text() for f in self.folder.glob("*.txt") if f.name != "users.txt"]
            log = self.folder / "pgbouncer.log"
            said.append(log.read_text() if log.exists() else "")
            pytest.fail(f"pgbouncer exited: {''.join(said)}")
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", self.port)) == 0

    def clients(self, database: str) -> set[tuple[str, int, str]]:
        """Client connections to `database` now, each as (address, port, connect time), from
        SHOW CLIENTS on the admin console."""
        import psycopg2

        user, password = self.server.username or "postgres", self.server.password or ""
        conn = psycopg2.connect(
            host="127.0.0.1", port=self.port, dbname="pgbouncer", user=user, password=password
        )
        try:
            conn.autocommit = True  # the console runs no transactions
            with conn.cursor() as cur:
                cur.execute("SHOW CLIENTS")
                names = [c.name for c in cur.description]
                rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
        finally:
            conn.close()
        return {
            (r["addr"], r["port"], str(r["connect_time"]))
            for r in rows
            if r["database"] == database
        }

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


@pytest.fixture
def bouncer() -> Iterator[PgBouncer]:
    require(BINARY is not None, "pgbouncer (Debian package pgbouncer)")
    # a folder of its own under /tmp: pytest's are closed to the user it may run as
    folder = Path(tempfile.mkdtemp(prefix="devicefarm-pgbouncer-"))
    server = PgBouncer(folder, free_port())
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def bounced(bouncer: PgBouncer) -> Iterator[tuple[str, str]]:
    """A new database (its name) and its URL through the pooler; no schema yet."""
    with new_pg_database("devicefarm_bounced") as direct:
        name = make_url(direct).database
        assert name
        yield name, bouncer.url(name)


class SessionPeak:
    """The most server sessions on `database` at once, sampled from pg_stat_activity over a
    direct connection, and every client connection the pooler served meanwhile."""

    def __init__(self, database: str, bouncer: PgBouncer):
        self.database, self.bouncer = database, bouncer
        self.peak = self.samples = 0
        self.clients: set[tuple[str, int, str]] = set()
        self._admin = create_engine(
            PG_ADMIN_URL.replace("postgresql://", "postgresql+psycopg2://", 1),
            isolation_level="AUTOCOMMIT",
        )
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def now(self) -> int:
        with self._admin.connect() as conn:
            return conn.execute(
                text("SELECT count(*) FROM pg_stat_activity WHERE datname = :d"),
                {"d": self.database},
            ).scalar_one()

    def advisory_locks(self) -> int:
        with self._admin.connect() as conn:
            return conn.execute(
                text(
                    "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database "
                    "WHERE l.locktype = 'advisory' AND d.datname = :d"
                ),
                {"d": self.database},
            ).scalar_one()

    def _loop(self) -> None:
        while not self._done.wait(0.02):
            self.peak = max(self.peak, self.now())
            self.clients |= self.bouncer.clients(self.database)
            self.samples += 1

    def __enter__(self) -> SessionPeak:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._done.set()
        self._thread.join()
        self._admin.dispose()


def test_a_campaign_runs_behind_a_transaction_pooler_within_its_server_pool(
    bouncer, bounced, redis_url, start_agent, models, monkeypatch
) -> None:
    name, url = bounced
    monkeypatch.setenv("DEVICEFARM_DB_POOLER", "transaction")  # for the agent too
    with SessionPeak(name, bouncer) as sessions:
        subprocess.run(  # the schema step, as a farm runs it
            [sys.executable, "-m", "devicefarm.cli", "db", "upgrade", "--db", url],
            check=True,
            cwd=REPO,
            capture_output=True,
        )
        farm = Farm(url, redis_url)
        try:
            with farm.engine.begin() as conn:  # its claims take the project's lock
                quotas.add(conn, "capped", max_concurrent_jobs=DEVICES)
            devices = [f"noop:bounced{i}?delay_s=0.5" for i in range(DEVICES)]
            agent = start_agent("P", devices, url, redis_url)
            sub = farm.submit(models(3), "kind=noop", "cpu", project="capped")
            assert sub.jobs == 3 * DEVICES and sub.sent > 0
            jobs = farm.wait_done(sub.campaign_id, timeout_s=120)  # reconciler passes too
            assert {j.state for j in jobs} == {SUCCEEDED}
            results = farm.results(sub.campaign_id)
            assert sorted(r.job_id for r in results) == [j.id for j in jobs]
            farm.reconcile()
            agent.stop()
        finally:
            farm.close()
        assert sessions.advisory_locks() == 0  # none left behind on a pooled session
    assert sessions.samples > 50
    # every consumer (one connection each at least), the agent and this test took turns
    assert 0 < sessions.peak <= POOL < DEVICES < len(sessions.clients), sessions.peak
    print(f"{len(sessions.clients)} clients on at most {sessions.peak} server sessions")


def test_a_worker_not_told_of_the_pooler_is_refused_with_a_reason(
    bounced, redis_url, monkeypatch, tmp_path
) -> None:
    _, url = bounced
    monkeypatch.delenv("DEVICEFARM_DB_POOLER", raising=False)
    env = dict(os.environ, PYTHONPATH=str(REPO), DEVICEFARM_HOME=str(tmp_path))
    cli = [sys.executable, "-m", "devicefarm.cli"]
    subprocess.run([*cli, "db", "upgrade", "--db", url], check=True, env=env, capture_output=True)
    worker = [*cli, "worker", "--db", url, "--broker", redis_url, "--devices", "noop:told"]
    done = subprocess.run(worker, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "DEVICEFARM_DB_POOLER=transaction" in done.stdout + done.stderr, done
