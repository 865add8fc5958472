"""Real services for the spine's integration tests: a redis-server of our own (so tests can
kill and restart it), a fresh PostgreSQL database per session, and worker agents as real
processes (each agent starts real Celery worker processes, one per device).

A missing service skips locally and fails in CI (CI=true).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require
from tests.support.farm import RedisServer, free_port, kill_group, wait_until

REPO = Path(__file__).resolve().parents[2]
#: The PostgreSQL server the tests make their databases on (scripts/test.sh sets it).
PG_ADMIN_URL = os.environ.get(
    "DEVICEFARM_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
#: Liveness timings for the tests: seconds instead of minutes.
FAST_TIMING = {
    "DEVICEFARM_HEARTBEAT_S": "0.5",
    "DEVICEFARM_OFFLINE_AFTER_S": "3",
    "DEVICEFARM_LEASE_S": "3",
    "DEVICEFARM_DISPATCH_GRACE_S": "2",
    "DEVICEFARM_LOST_CONFIRM_S": "2",
    "DEVICEFARM_DEVICE_GONE_S": "5",
    "DEVICEFARM_HEALTH_RETRY_S": "2",
}
AGENT_READY_S = 60.0


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory) -> Iterator[RedisServer]:
    require(shutil.which("redis-server") is not None, "redis-server")
    server = RedisServer(free_port(), tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    import redis

    if redis_server.proc is None or redis_server.proc.poll() is not None:
        redis_server.start()
    redis.Redis.from_url(redis_server.url).flushall()
    return redis_server.url


@contextlib.contextmanager
def new_pg_database(prefix: str) -> Iterator[str]:
    """A new, empty PostgreSQL database on the test server, dropped afterwards."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import OperationalError

    admin_url = PG_ADMIN_URL.replace("postgresql://", "postgresql+psycopg2://", 1)
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text("SELECT 1"))
    except OperationalError as exc:
        require(False, f"PostgreSQL at {PG_ADMIN_URL} ({exc.orig})")
    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(
                text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :n"),
                {"n": name},
            )
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        admin.dispose()


@pytest.fixture(scope="session")
def pg_session_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session, dropped at the end."""
    from farm_core.database import make_engine

    with new_pg_database("devicefarm_test") as url:
        yield url
        make_engine(url).dispose()


@pytest.fixture
def pg_url(pg_session_url: str) -> str:
    """The session's database, migrated and emptied for this test."""
    from sqlalchemy import text

    from farm_core.database import open_database

    engine = open_database(pg_session_url)
    with engine.begin() as conn:
        conn.execute(
            text(
                "TRUNCATE artifacts, results, attempts, jobs, campaigns, reservations, projects, "
                "devices, models RESTART IDENTITY"
            )
        )
    engine.dispose()
    return pg_session_url


@pytest.fixture
def fast_timing(monkeypatch) -> None:
    """Short liveness timings, for this process and the agents it starts."""
    for k, v in FAST_TIMING.items():
        monkeypatch.setenv(k, v)


class AgentProcess:
    """`devicefarm worker` as a real process group (agent + Celery consumers + pools)."""

    def __init__(self, proc: subprocess.Popen, name: str, keys: list[str], log: Path):
        self.proc, self.name, self.keys, self.log = proc, name, keys, log

    def kill(self) -> None:
        """SIGKILL the agent and all its processes: no goodbye, no acks."""
        kill_group(self.proc, signal.SIGKILL)

    def stop(self) -> None:
        kill_group(self.proc, signal.SIGTERM)


@pytest.fixture
def start_agent(tmp_path: Path, fast_timing) -> Iterator[Callable[..., AgentProcess]]:
    started: list[AgentProcess] = []

    def start(
        name: str,
        devices: list[str],
        db_url: str,
        broker_url: str,
        wait: bool = True,
        ready: list[str] | None = None,
    ) -> AgentProcess:
        from worker_agent.discovery import noop_device

        log = tmp_path / f"agent-{name}.log"
        env = dict(os.environ, PYTHONPATH=str(REPO), DEVICEFARM_HOME=str(tmp_path / name))
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "devicefarm.cli",
                "worker",
                "--broker",
                broker_url,
                "--db",
                db_url,
                "--devices",
                ",".join(devices),
                "--name",
                name,
                "--loglevel",
                "INFO",
            ],
            cwd=str(tmp_path),
            env=env,
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        keys = [noop_device(d, "h").key for d in devices]
        agent = AgentProcess(proc, name, keys, log)
        started.append(agent)
        if wait:
            want = keys if ready is None else ready
            wait_until(lambda: _consumers_ready(agent, want), AGENT_READY_S, f"agent {name}")
        return agent

    yield start
    for agent in started:
        agent.kill()


def _consumers_ready(agent: AgentProcess, keys: list[str]) -> bool:
    """Every consumer of `keys` has said it is ready (Celery's "<hostname> ready.")."""
    if agent.proc.poll() is not None:
        pytest.fail(f"agent {agent.name} exited:\n{agent.log.read_text()[-3000:]}")
    text = agent.log.read_text()
    return all(f" {key}@" in text and f"{key}@{_host()} ready." in text for key in keys)


def _host() -> str:
    from worker_agent.devices import host_name

    return host_name()


class Farm:
    """The orchestrator side of a test: the database, a dispatcher and the reconciler."""

    def __init__(self, db_url: str, broker_url: str):
        from farm_core.database import open_database
        from farm_core.dispatch import CeleryDispatcher
        from farm_core.settings import Timing
        from orchestrator.probes import probe_for

        self.db_url, self.broker_url = db_url, broker_url
        self.engine = open_database(db_url)
        self.dispatcher = CeleryDispatcher(broker_url)
        self.probe = probe_for(broker_url)
        self.timing = Timing.from_env()

    def submit(self, models, selector: str, configs: str = "cpu", **kw):
        from orchestrator.submit import RunSettings, submit

        kw.setdefault("settings", RunSettings(num_runs=1, diff_runs=0))
        return submit(
            self.engine, self.dispatcher, models, selector, configs, timing=self.timing, **kw
        )

    def jobs(self, campaign_id: int) -> list:
        from sqlalchemy import select

        from farm_core.schema import Job

        with self.engine.begin() as conn:
            return conn.execute(
                select(Job).where(Job.campaign_id == campaign_id).order_by(Job.id)
            ).all()

    def results(self, campaign_id: int) -> list:
        from sqlalchemy import select

        from farm_core.schema import Result

        with self.engine.begin() as conn:
            return conn.execute(
                select(Result).where(Result.campaign_id == campaign_id).order_by(Result.job_id)
            ).all()

    def reconcile(self):
        from orchestrator.reconciler import reconcile

        return reconcile(self.engine, self.dispatcher, self.probe, self.timing)

    def wait_done(self, campaign_id: int, timeout_s: float = 60.0) -> list:
        """Run the reconciler until every job of the campaign has ended."""
        from farm_core.schema import TERMINAL_STATES

        def done():
            self.reconcile()
            jobs = self.jobs(campaign_id)
            return jobs if all(j.state in TERMINAL_STATES for j in jobs) else None

        return wait_until(done, timeout_s, f"campaign {campaign_id} to finish", 0.5)

    def close(self) -> None:
        self.dispatcher.close()
        self.engine.dispose()


@pytest.fixture
def farm(pg_url: str, redis_url: str, fast_timing) -> Iterator[Farm]:
    f = Farm(pg_url, redis_url)
    yield f
    f.close()


@pytest.fixture
def models(tmp_path: Path) -> Callable[[int], list[Path]]:
    """`models(n)`: n distinct small model files."""
    from tests.support.farm import write_model

    def make(n: int) -> list[Path]:
        return [write_model(tmp_path / f"m{i}.tflite", 1.0 + i) for i in range(n)]

    return make


@pytest.fixture(scope="module")
def adb_server() -> Iterator[Any]:
    """Debian's adb server with the simulator's transport (one per test module)."""
    from worker_agent.android.simulator.testing import AdbServer

    require(shutil.which("adb") is not None, "adb (Debian package adb)")
    require(importlib.util.find_spec("adbutils") is not None, "adbutils")
    server = AdbServer().start()
    yield server
    server.stop()
