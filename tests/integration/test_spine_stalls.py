"""Stalls the farm must not have (issue 16, points 1-7): a farm that looks healthy and does
nothing. Each test failed on the behaviour before its fix."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.farm import wait_until, write_model

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 240
#: Processes that spin beside `devicefarm run` (the issue's load: six on two cores).
BUSY_PROCESSES = 6
#: How long Redis stays down in the restart tests (longer than a job: its ack fails).
REDIS_DOWN_S = 4.0


def devicefarm_run(args: list[str], home: Path, **env: str) -> subprocess.CompletedProcess:
    environ = dict(os.environ, PYTHONPATH=str(REPO), DEVICEFARM_HOME=str(home), **env)
    for k in ("DEVICEFARM_DB", "DEVICEFARM_BROKER"):
        environ.pop(k, None)
    return subprocess.run(
        [sys.executable, "-m", "devicefarm.cli", "run", *args],
        cwd=home.parent,
        env=environ,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )


def test_heartbeats_go_on_while_canaries_run_longer_than_offline_after(tmp_path: Path) -> None:
    """Point 3: a 4 s canary with offline_after_s=2 (before: 'offline', nothing submitted)."""
    model = write_model(tmp_path / "tiny.tflite")
    done = devicefarm_run(
        [str(model), "--devices", "noop:slowcanary?canary_s=4", "--configs", "cpu"],
        tmp_path / "home",
        DEVICEFARM_HEARTBEAT_S="0.5",
        DEVICEFARM_OFFLINE_AFTER_S="2",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[1/1]" in done.stdout and "succeeded" in done.stdout


@pytest.fixture
def busy_processes():
    """Six processes spinning on the CPU for as long as the test runs."""
    procs = [
        subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(BUSY_PROCESSES)
    ]
    yield procs
    for p in procs:
        p.kill()
        p.wait()


def test_run_on_a_busy_machine_succeeds(tmp_path: Path, busy_processes) -> None:
    """Point 3 as the issue measured it: `devicefarm run` on this machine's real devices with
    six busy processes beside it (before: its own devices were 'offline')."""
    model = write_model(tmp_path / "tiny.tflite")
    done = devicefarm_run([str(model), "--runs", "3", "--diff-runs", "1"], tmp_path / "home")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "succeeded" in done.stdout[done.stdout.index("model ") :]


class DatabaseOutage:
    """Makes a PostgreSQL database unreachable: new connections refused, open ones ended."""

    def __init__(self, db_url: str):
        from sqlalchemy import create_engine

        from tests.integration.conftest import PG_ADMIN_URL

        self.name = db_url.rsplit("/", 1)[1]
        admin = PG_ADMIN_URL.replace("postgresql://", "postgresql+psycopg2://", 1)
        self.admin = create_engine(admin, isolation_level="AUTOCOMMIT")

    def begin(self) -> None:
        from sqlalchemy import text

        with self.admin.connect() as conn:
            conn.execute(text(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS false'))
            conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = :n AND pid <> pg_backend_pid()"
                ),
                {"n": self.name},
            )

    def end(self) -> None:
        from sqlalchemy import text

        with self.admin.connect() as conn:
            conn.execute(text(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS true'))

    def close(self) -> None:
        self.end()
        self.admin.dispose()


@pytest.fixture
def outage(pg_url: str):
    o = DatabaseOutage(pg_url)
    yield o
    o.close()


def test_reconcile_every_outlives_a_database_outage(pg_url, redis_url, outage, tmp_path) -> None:
    """Point 2: `reconcile --every` logs a failed pass and goes on (before: it exited)."""
    log = tmp_path / "reconcile.log"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-m", "devicefarm.cli", "reconcile", "--every", "0.3"]
        + ["--db", pg_url, "--broker", redis_url],
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until(lambda: "reconciling every" in log.read_text(), 60, "the reconciler")
        time.sleep(1)
        outage.begin()
        time.sleep(5)
        outage.end()
        wait_until(lambda: "recovered" in log.read_text(), 60, "the reconciler to recover")
        assert proc.poll() is None, log.read_text()
        assert "reconcile pass failed (OperationalError" in log.read_text()
    finally:
        proc.kill()
        proc.wait()


def test_jobs_that_meet_a_database_outage_run_without_the_reconciler(
    farm, start_agent, models, outage
) -> None:
    """Point 2: a task whose database calls fail puts its message back (before: acked as
    done, the job stayed 'dispatched' until a reconciler re-sent it)."""
    from farm_core.schema import SUCCEEDED

    start_agent("D", ["noop:d?delay_s=0.2"], farm.db_url, farm.broker_url)
    sub = farm.submit(models(6), "key=noop:d", "cpu")
    wait_until(
        lambda: any(j.state == SUCCEEDED for j in farm.jobs(sub.campaign_id)),
        30,
        "a first job to finish",
    )
    outage.begin()
    time.sleep(5)
    outage.end()
    farm.engine.dispose()  # its pooled connections were ended

    def all_succeeded():
        jobs = farm.jobs(sub.campaign_id)
        return jobs if all(j.state == SUCCEEDED for j in jobs) else None

    jobs = wait_until(all_succeeded, 90, "every job to succeed (no reconciler pass)", 1.0)
    assert len(farm.results(sub.campaign_id)) == len(jobs)


@pytest.fixture(params=[False, True], ids=["redis-empty", "redis-persistent"])
def restartable_redis(request, tmp_path):
    from tests.support.farm import RedisServer, free_port

    server = RedisServer(free_port(), tmp_path, persistent=request.param)
    server.start()
    yield server
    server.stop()


def test_consumers_consume_again_after_a_redis_restart_mid_job(
    pg_url, restartable_redis, fast_timing, start_agent, models
) -> None:
    """Point 1: Redis goes down while jobs run, so their acks fail (before: those consumers
    never called BRPOP again and the campaign stalled with its devices 'online')."""
    from tests.integration.conftest import Farm

    farm = Farm(pg_url, restartable_redis.url)
    try:
        start_agent("A", ["noop:a?delay_s=2&tags=pool"], farm.db_url, farm.broker_url)
        start_agent("B", ["noop:b?delay_s=2&tags=pool"], farm.db_url, farm.broker_url)
        sub = farm.submit(models(8), "tag=pool", "cpu")
        wait_until(
            lambda: len([j for j in farm.jobs(sub.campaign_id) if j.state == "running"]) == 2,
            30,
            "both devices to run a job",
        )
        restartable_redis.stop()
        time.sleep(REDIS_DOWN_S)  # the running jobs end meanwhile: their acks fail
        restartable_redis.start()
        jobs = farm.wait_done(sub.campaign_id, timeout_s=60)
        assert {j.state for j in jobs} == {"succeeded"}
        assert sorted(r.job_id for r in farm.results(sub.campaign_id)) == [j.id for j in jobs]
    finally:
        farm.close()


def test_cancelling_a_running_job_frees_its_device(farm, start_agent, models) -> None:
    """Point 7: the worker aborts a cancelled job at its next lease renewal (before: the
    job ran to its end, 60 s here, with the device busy)."""
    from farm_core import jobs
    from farm_core.schema import CANCELLED

    agent = start_agent("C", ["noop:c?delay_s=60"], farm.db_url, farm.broker_url)
    sub = farm.submit(models(1), "key=noop:c", "cpu")
    (job,) = wait_until(
        lambda: [j for j in farm.jobs(sub.campaign_id) if j.state == "running"],
        30,
        "the long job to start",
    )
    with farm.engine.begin() as conn:
        jobs.cancel(conn, sub.campaign_id)
    cancelled_at = time.monotonic()
    ended = f"df-job-{job.id}-{job.attempt}] succeeded in"
    wait_until(lambda: ended in agent.log.read_text(), 30, "the worker to drop the job")
    assert time.monotonic() - cancelled_at < 30
    assert "'stale'" in agent.log.read_text().split(ended, 1)[1].splitlines()[0]
    assert [j.state for j in farm.jobs(sub.campaign_id)] == [CANCELLED]
    assert farm.results(sub.campaign_id) == []


def test_sigterm_on_an_agent_marks_its_devices_offline_at_once(farm, start_agent) -> None:
    """Point 7: SIGTERM: devices offline now, without a reconciler pass (before: 'online'
    until offline_after_s passed and a reconciler noticed)."""
    from sqlalchemy import select

    from farm_core.schema import Device

    agent = start_agent("T", ["noop:t"], farm.db_url, farm.broker_url)
    agent.proc.send_signal(__import__("signal").SIGTERM)
    agent.proc.wait(30)

    def state():
        with farm.engine.begin() as conn:
            return conn.execute(select(Device.state).where(Device.key == "noop:t")).scalar()

    assert state() == "offline"


def test_sigterm_on_the_dashboard_ends_streamlit(tmp_path: Path) -> None:
    """Point 7: nothing keeps serving after `devicefarm dashboard` is told to stop."""
    import signal
    import socket

    from tests.conftest import require
    from tests.support.farm import free_port

    try:
        import streamlit  # noqa: F401
    except ImportError:
        require(False, "streamlit")
    from farm_core.database import open_database

    open_database(f"sqlite:///{tmp_path / 'farm.db'}").dispose()  # a farm to serve
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-m", "devicefarm.cli", "dashboard", "--port", str(port)]
        + ["--db", f"sqlite:///{tmp_path / 'farm.db'}"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )

    def serving() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_until(serving, 90, "the dashboard to listen", 0.5)
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        wait_until(lambda: not serving(), 15, "the dashboard's port to close", 0.5)
    finally:
        with __import__("contextlib").suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def test_second_agent_on_a_live_device_is_refused(farm, start_agent) -> None:
    """Point 5: a second agent serving the same device key is refused with a clear message
    (before: it took the device over silently and two jobs ran on it at once)."""
    from sqlalchemy import select

    from farm_core.schema import Device

    start_agent("first", ["noop:live"], farm.db_url, farm.broker_url)
    second = start_agent("second", ["noop:live"], farm.db_url, farm.broker_url, wait=False)
    assert second.proc.wait(60) != 0
    text = second.log.read_text()
    assert "noop:live is served by agent first" in text and "refused" in text
    with farm.engine.begin() as conn:
        assert conn.execute(select(Device.agent).where(Device.key == "noop:live")).scalar() == (
            "first"
        )


def test_restarted_agent_takes_back_its_devices_once_the_old_one_is_quiet(
    farm, start_agent, models
) -> None:
    """Point 5's other side: a killed agent's devices go to its successor after at most
    offline_after_s, and jobs run there."""
    from farm_core.schema import SUCCEEDED

    start_agent("old", ["noop:r"], farm.db_url, farm.broker_url).kill()
    start_agent("new", ["noop:r"], farm.db_url, farm.broker_url)
    sub = farm.submit(models(1), "key=noop:r", "cpu")
    assert [j.state for j in farm.wait_done(sub.campaign_id, 60)] == [SUCCEEDED]


class PhoneLab:
    """A private adb server, the lab host's tools, and phone agents (`devicefarm worker
    --devices android,noop:keep_NAME`: the no-op device lets an agent start with no phone)."""

    def __init__(self, tmp_path: Path, db_url: str, broker_url: str):
        from worker_agent.android.simulator.testing import AdbServer

        self.tmp_path, self.db_url, self.broker_url = tmp_path, db_url, broker_url
        self.tools = tmp_path / "tools"
        (self.tools / "arm64-v8a").mkdir(parents=True)
        for tool in ("benchmark_model", "run_eval"):
            (self.tools / "arm64-v8a" / tool).write_bytes(b"\x7fELF " + tool.encode())
        self.server = AdbServer().start()
        self.phones: list = []
        self.agents: list[subprocess.Popen] = []

    def plug(self, phone=None, profile: str = "pixel-7"):
        """Start (or restart) a simulated phone and `adb connect` it."""
        from worker_agent.android.simulator import SimulatedPhone

        if phone is None:
            phone = SimulatedPhone(profile)
            self.phones.append(phone)
        phone.start()
        assert "connected" in self.server.connect(phone.serial)
        return phone

    def agent(self, name: str, devices: str = "", tags: str = "") -> Path:
        """Start agent `name` on `devices` (default android,noop:keep_NAME) with `tags`;
        returns its log once it serves."""
        log = self.tmp_path / f"agent-{name}.log"
        env = dict(
            os.environ,
            PYTHONPATH=str(REPO),
            DEVICEFARM_HOME=str(self.tmp_path / name),
            ANDROID_ADB_SERVER_PORT=str(self.server.port),
            DEVICEFARM_ANDROID_TOOLS=str(self.tools),
            DEVICEFARM_ANDROID_COOLDOWN_S="0",
            DEVICEFARM_REDISCOVER_S="1",
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "devicefarm.cli", "worker", "--no-canary", "--name", name]
            + ["--devices", devices or f"android,noop:keep_{name}", "--tags", tags]
            + ["--loglevel", "INFO", "--db", self.db_url, "--broker", self.broker_url],
            env=env,
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.agents.append(proc)
        wait_until(lambda: f"agent {name}: serving" in log.read_text(), 60, f"agent {name}")
        return log

    def kill_agents(self) -> None:
        from tests.support.farm import kill_group

        for proc in self.agents:
            kill_group(proc)
        self.agents = []

    def close(self) -> None:
        self.kill_agents()
        for phone in self.phones:
            phone.stop()
        self.server.stop()


@pytest.fixture
def phone_lab(farm, tmp_path: Path):
    import importlib.util
    import shutil

    from tests.conftest import require

    require(shutil.which("adb") is not None, "adb (Debian package adb)")
    require(importlib.util.find_spec("adbutils") is not None, "adbutils")
    lab = PhoneLab(tmp_path, farm.db_url, farm.broker_url)
    yield lab
    lab.close()


def _served_by(farm, key: str) -> tuple | None:
    from sqlalchemy import select

    from farm_core.schema import Device

    with farm.engine.begin() as conn:
        row = conn.execute(select(Device.agent, Device.state).where(Device.key == key)).first()
    return None if row is None else tuple(row)


def test_agent_picks_up_a_phone_attached_after_it_started(farm, phone_lab) -> None:
    """Point 4: the agent looks for phones again every rediscover_s (before: a phone that
    came back after the agent started was never served)."""
    log = phone_lab.agent("P")
    phone = phone_lab.plug()
    key = f"android:{phone.serial}"
    wait_until(lambda: _served_by(farm, key) == ("P", "online"), 60, f"P to serve {key}")
    wait_until(lambda: f"{key}@" in log.read_text(), 60, "its consumer")


#: The dead agent's heartbeat counts as live this long in the restart test: longer than a
#: new agent takes to start, so the phone comes back while its old row still looks served.
RESTART_OFFLINE_AFTER_S = 20


def test_restarted_agent_picks_up_a_phone_that_comes_back(
    farm, phone_lab, models, monkeypatch
) -> None:
    """Point 4 as the issue met it: the agent serving a phone dies, the phone goes away, a
    new agent starts, and the phone comes back while the dead agent's last heartbeat is
    still fresh (before: the new agent refused it for good and it stayed offline). The new
    agent takes it once that heartbeat is older than offline_after_s, and runs its jobs."""
    from farm_core.schema import SUCCEEDED

    monkeypatch.setenv("DEVICEFARM_OFFLINE_AFTER_S", str(RESTART_OFFLINE_AFTER_S))
    phone = phone_lab.plug()
    key = f"android:{phone.serial}"
    phone_lab.agent("old")
    wait_until(lambda: _served_by(farm, key) == ("old", "online"), 60, f"old to serve {key}")
    phone_lab.kill_agents()
    died = time.monotonic()
    phone.stop()
    log = phone_lab.agent("new")
    phone_lab.plug(phone)
    assert time.monotonic() - died < RESTART_OFFLINE_AFTER_S, "too slow to test the window"
    wait_until(
        lambda: _served_by(farm, key) == ("new", "online"),
        RESTART_OFFLINE_AFTER_S + 30,
        f"new to serve {key}",
    )
    assert f"{key} is served by agent old: refused while that agent is live" in log.read_text()
    sub = farm.submit(models(1), f"key={key}", "cpu")
    assert [j.state for j in farm.wait_done(sub.campaign_id, 90)] == [SUCCEEDED]


def test_opencl_keys_include_the_host() -> None:
    """Point 5: two hosts with one GPU model serve two devices, not one (before: OpenCL
    keys had no host part and a second host's agent took the first one's device)."""
    from tests.conftest import require
    from worker_agent.discovery import discover_opencl

    first, second = discover_opencl("lab_a"), discover_opencl("lab_b")
    require(bool(first), "an OpenCL device (PoCL)")
    assert len({d.key for d in first}) == len(first)  # one key per device of a host
    assert not {d.key for d in first} & {d.key for d in second}
    for d in first:
        assert d.key.endswith(":lab_a") and d.host == "lab_a"


def test_a_job_over_its_memory_limit_fails_and_the_worker_goes_on(
    farm, start_agent, models, monkeypatch
) -> None:
    """Point 8: each job runs under a memory limit (before: a job could take the host's
    memory; here it filled 600 MiB and 'succeeded')."""
    from farm_core.schema import FAILED

    monkeypatch.setenv("DEVICEFARM_JOB_MEMORY_MB", "256")
    start_agent("M", ["noop:hog?alloc_mb=600"], farm.db_url, farm.broker_url)
    sub = farm.submit(models(2), "key=noop:hog", "cpu")
    jobs = farm.wait_done(sub.campaign_id, timeout_s=60)
    assert [j.state for j in jobs] == [FAILED, FAILED]  # the second ran after the first
    for j in jobs:
        assert "MemoryError: the job needed more than its memory limit (256 MiB" in j.reason
    assert len(farm.results(sub.campaign_id)) == 2
