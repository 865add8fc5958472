"""A redis-server of its own, on a port of its own."""

from __future__ import annotations

import subprocess
from pathlib import Path

from .processes import kill_group, wait_until


class RedisServer:
    """A redis-server on a port of its own; stop/start keep the port. Without persistence
    by default; `persistent=True` keeps everything in an append-only file (fsync always)."""

    def __init__(self, port: int, workdir: Path, persistent: bool = False):
        self.port = port
        self.workdir = workdir
        self.persistent = persistent
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "yes" if self.persistent else "no",
                "--appendfsync",
                "always",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        import redis

        client = redis.Redis.from_url(self.url)
        wait_until(lambda: _ping(client), 10, "redis-server to start", 0.05)

    def stop(self) -> None:
        """Kill it: whatever it held is gone (unless persistent)."""
        if self.proc is not None:
            kill_group(self.proc)
            self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()


def _ping(client) -> bool:
    import redis

    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
