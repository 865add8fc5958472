"""README's "A lab on three hosts", run as written: a server host, a GPU lab host, a phone
lab host and a client, each block of lines in a bash of its own with its own HOME.

The hosts are this machine: `SERVER` is 127.0.0.1; the README's ports (6379, 8000, 8501),
database name and folders become free ones of this test (the kernel caches stay the
machine's); the phones are simulated
(worker_agent.android.simulator) behind Debian's real adb server; the `pip` lines are left
out (this virtualenv has every extra). Everything else is the README's text.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import require, require_module
from tests.integration.conftest import PG_ADMIN_URL
from tests.support.farm import free_port, wait_until

require_module("adbutils")
require_module("streamlit")
from worker_agent.android.simulator import SimulatedPhone  # noqa: E402
from worker_agent.android.simulator.testing import AdbServer  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.integration]
REPO = Path(__file__).resolve().parents[2]
SECTION = "## A lab on three hosts"
HOSTS = ("server", "lab-gpu", "lab-phones", "client")
#: The agents' start-up canaries compile kernels (minutes on a cold PoCL cache).
AGENTS_READY_S = 420
#: The client's `submit --wait`: one model on three devices.
CLIENT_S = 420
TOKEN_LINE = re.compile(r"^[A-Za-z0-9_-]{32,}$", re.M)


def readme_blocks() -> list[list[str]]:
    """The section's code blocks, in order: each a list of its lines."""
    text = (REPO / "README.md").read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    section = text[start : end if end > 0 else None]
    return [b.strip().splitlines() for b in re.findall(r"```\n(.*?)```", section, re.S)]


class Lab:
    """The values this test gives the README's placeholders, and its hosts' processes."""

    def __init__(self, tmp: Path, adb: AdbServer, tools: Path):
        admin = PG_ADMIN_URL.split("://", 1)[1]  # user:password@host:port/db
        self.pg_password = admin.split("@", 1)[0].partition(":")[2] or "postgres"
        self.pg_port = admin.split("@", 1)[1].split("/", 1)[0].rpartition(":")[2]
        self.database = f"devicefarm_lab_{os.getpid()}_{uuid.uuid4().hex[:6]}"
        self.redis_port, self.api_port, self.dashboard_port = free_port(), free_port(), free_port()
        self.tmp, self.adb, self.tools = tmp, adb, tools
        self.token = ""
        self.sessions: list[subprocess.Popen] = []

    def line(self, text: str) -> str:
        """A README line with this lab's values in place of the README's."""
        text = text.replace("6379", str(self.redis_port))
        text = re.sub(r"\b8000\b", str(self.api_port), text)
        text = re.sub(r"\b8501\b", str(self.dashboard_port), text)
        text = text.replace(":5432/devicefarm", f":{self.pg_port}/{self.database}")
        text = text.replace("-U postgres devicefarm", f"-U postgres {self.database}")
        text = text.replace("/var/lib/devicefarm-redis", str(self.tmp / "redis"))
        text = text.replace("/opt/tflite-tools", str(self.tools))
        for word, value in {
            "PG_PASSWORD": self.pg_password,
            "REDIS_PASSWORD": "broker-secret",
            "SERVER": "127.0.0.1",
            "TOKEN": self.token,
        }.items():
            text = re.sub(rf"\b{word}\b", value, text)
        return text

    def script(self, block: list[str]) -> str:
        lines = [self.line(x) for x in block if not x.startswith("pip install")]
        return "set -e\n" + "\n".join(lines) + "\n"

    def env(self, host: str) -> dict[str, str]:
        """A host's environment: its own HOME, no DEVICEFARM_* of the test session."""
        home = self.tmp / host
        home.mkdir(exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DEVICEFARM_", "XDG_"))}
        env |= {
            "HOME": str(home),
            # the machine's kernel caches (ours, PoCL's): a lab host compiles a kernel once,
            # not each time this test runs (tests/e2e/test_main_job_progress.py runs cold)
            "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache"),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
            "PYTHONPATH": str(REPO),
        }
        if host == "lab-phones":  # the host's adb server; no cool-down between runs
            env |= {
                "ANDROID_ADB_SERVER_PORT": str(self.adb.port),
                "DEVICEFARM_ANDROID_COOLDOWN_S": "0",
            }
        return env

    def start(self, host: str, block: list[str]) -> tuple[subprocess.Popen, Path]:
        """The host's lines in a bash of their own (its background servers in its session)."""
        log = self.tmp / f"{host}.log"
        proc = subprocess.Popen(
            ["bash", "-c", self.script(block)],
            cwd=self.tmp / host if (self.tmp / host).exists() else self.tmp,
            env=self.env(host),
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.sessions.append(proc)
        return proc, log

    def stop(self) -> None:
        """End every host's processes: their bash may have exited, its servers not."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for proc in self.sessions:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, sig)
            with contextlib.suppress(AssertionError):
                wait_until(lambda: not _running({p.pid for p in self.sessions}), 10, "the hosts")
        for proc in self.sessions:
            proc.wait()


def _running(groups: set[int]) -> bool:
    """Whether a process of these process groups still runs (zombies left to init aside)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            state, _, pgrp = stat.read_text().rpartition(")")[2].split()[:3]
            if int(pgrp) in groups and state != "Z":
                return True
    return False


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    require(shutil.which("redis-server") is not None, "redis-server")
    require(shutil.which("createdb") is not None, "createdb (PostgreSQL's client)")
    require(shutil.which("adb") is not None, "adb (Debian package adb)")
    tools = tmp_path / "tflite-tools"
    (tools / "arm64-v8a").mkdir(parents=True)
    (tools / "arm64-v8a" / "benchmark_model").write_bytes(b"\x7fELF benchmark_model")
    (tools / "arm64-v8a" / "run_eval").write_bytes(b"\x7fELF run_eval")
    (tmp_path / "redis").mkdir()
    adb = AdbServer().start()
    phone = SimulatedPhone("pixel-7").start()
    lab = Lab(tmp_path, adb, tools)
    try:
        assert "connected" in adb.connect(phone.serial)
        yield lab
    finally:
        lab.stop()
        phone.stop()
        adb.stop()
        _drop_database(lab.database)


def _drop_database(name: str) -> None:
    from sqlalchemy import create_engine, text

    admin = create_engine(
        PG_ADMIN_URL.replace("postgresql://", "postgresql+psycopg2://", 1),
        isolation_level="AUTOCOMMIT",
    )
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def test_the_readme_has_a_block_per_host() -> None:
    blocks = readme_blocks()
    assert len(blocks) == len(HOSTS), blocks
    assert blocks[1][-1].startswith("devicefarm worker") and "gpus" in blocks[1][-1]
    assert blocks[2][-1].startswith("devicefarm worker") and "phones" in blocks[2][-1]


def test_a_lab_on_three_hosts_runs_as_the_readme_says(lab: Lab) -> None:
    server, gpu_host, phone_host, client = readme_blocks()

    proc, server_log = lab.start("server", server)
    assert proc.wait(timeout=120) == 0, server_log.read_text()
    tokens = TOKEN_LINE.findall(server_log.read_text())
    assert len(tokens) == 1, server_log.read_text()
    lab.token = tokens[0]
    api = f"http://127.0.0.1:{lab.api_port}"
    wait_until(lambda: _answers(f"{api}/v1/health"), 60, "the API to answer")
    dashboard = f"http://127.0.0.1:{lab.dashboard_port}"
    wait_until(lambda: _answers(f"{dashboard}/_stcore/health"), 90, "the dashboard to answer")

    agents = [lab.start("lab-gpu", gpu_host), lab.start("lab-phones", phone_host)]
    db_url = lab.line("postgresql://postgres:PG_PASSWORD@SERVER:5432/devicefarm")

    def online() -> bool:
        for proc, log in agents:
            assert proc.poll() is None, log.read_text()[-3000:]
        return _online_tags(db_url) >= {"gpus", "phones"}

    wait_until(online, AGENTS_READY_S, "both lab hosts' devices to come online")

    done = lab.start("client", client)
    (proc, client_log) = done
    rc = proc.wait(timeout=CLIENT_S)
    out = client_log.read_text()
    assert rc == 0, out
    assert re.search(r"android:\S+ gpu-fp16: succeeded", out), out
    assert re.search(r"opencl:\S+ gpu-fp16: succeeded", out), out
    assert "phones" in out and "gpus" in out  # `devicefarm devices` lists both hosts' tags


def _online_tags(db_url: str) -> set[str]:
    """The tags of the devices that are online, read from the farm's database."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import SQLAlchemyError

    engine = create_engine(db_url.replace("postgresql://", "postgresql+psycopg2://", 1))
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT tags FROM devices WHERE state = 'online' AND health = 'healthy'")
            ).all()
    except SQLAlchemyError:  # the schema may not be there yet
        return set()
    finally:
        engine.dispose()
    return {tag for (tags,) in rows for tag in (tags or [])}
