"""A private adb server for tests and demos: `adb -P PORT start-server` on a free port,
with its own HOME (its keys never touch the user's ~/.android), killed on stop."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

#: Seconds to wait for the server to start or stop, and for `adb connect`.
SERVER_WAIT_S = 20.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), 0.5):
            return True
    except OSError:
        return False


class AdbServer:
    """The real adb server on 127.0.0.1:`port`; `start()`, `connect(serial)`, `stop()`."""

    def __init__(self, port: int | None = None, adb: str | None = None):
        self.port = port or free_port()
        self.adb = adb or shutil.which("adb") or "adb"
        self.home = Path(tempfile.mkdtemp(prefix="devicefarm-adb-home-"))

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANDROID_ADB_SERVER")}
        env |= {"HOME": str(self.home), "ANDROID_SDK_HOME": str(self.home)}
        return env

    def run(self, *args: str, timeout_s: float = SERVER_WAIT_S) -> subprocess.CompletedProcess:
        return subprocess.run(
            [self.adb, "-P", str(self.port), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )

    def start(self) -> AdbServer:
        done = self.run("start-server")
        if done.returncode != 0 or not _listening(self.port):
            raise RuntimeError(f"adb start-server failed: {done.stderr.strip()}")
        return self

    def connect(self, serial: str) -> str:
        """`adb connect serial`; returns adb's answer ("connected to ...")."""
        return self.run("connect", serial).stdout.strip()

    def stop(self) -> None:
        """kill-server, and wait until the port is free."""
        if _listening(self.port):
            self.run("kill-server")
        deadline = time.monotonic() + SERVER_WAIT_S
        while _listening(self.port) and time.monotonic() < deadline:
            time.sleep(0.1)
        shutil.rmtree(self.home, ignore_errors=True)

    def __enter__(self) -> AdbServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
