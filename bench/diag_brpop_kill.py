"""Where a message goes when Redis is killed while a consumer's BRPOP reply is unread.

    python bench/diag_brpop_kill.py [--consumers 20]

A private redis-server (append-only file, fsync always, as the fleet bench runs it) gets
`--consumers` connections each blocked in BRPOP on a list of its own; one message is
pushed to every list (Redis pops it and writes the reply), then redis-server is SIGKILLed
before any reply is read. Printed: how many replies the consumers can still read from
their sockets, and how many messages the lists hold after a restart from the file. On
this machine (2026-12-04): 20 of 20 readable, 0 left: a message popped at the kill is only
in the consumer's socket, so a consumer that drops a channel without reading its pending
reply loses it, and the reconciler rightly calls it lost. Whether the device group's
reconnect (worker_agent/group.py: every channel forgotten at the first connection error)
is such a consumer is not checked yet.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time


def start(port: int, folder: str) -> subprocess.Popen:
    import redis

    args = ["redis-server", "--port", str(port), "--dir", folder, "--save", ""]
    args += ["--appendonly", "yes", "--appendfsync", "always"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL)
    for _ in range(200):
        try:
            redis.Redis(port=port).ping()
            return proc
        except redis.RedisError:
            time.sleep(0.05)
    raise RuntimeError("redis-server did not start")


def main() -> int:
    import redis

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--consumers", type=int, default=20)
    ap.add_argument("--port", type=int, default=56999)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="brpop-kill-") as folder:
        server = start(a.port, folder)
        consumers = []
        for i in range(a.consumers):
            conn = redis.Connection(port=a.port)
            conn.connect()
            conn.send_command("BRPOP", f"q{i}", 30)
            consumers.append(conn)
        time.sleep(0.2)  # every BRPOP blocked
        client = redis.Redis(port=a.port)
        for i in range(a.consumers):
            client.lpush(f"q{i}", f"m{i}")
        time.sleep(0.2)  # every reply written
        os.kill(server.pid, signal.SIGKILL)
        server.wait()
        readable = 0
        for conn in consumers:
            with contextlib.suppress(redis.RedisError):
                readable += conn.read_response() is not None
        server = start(a.port, folder)
        left = sum(redis.Redis(port=a.port).llen(f"q{i}") for i in range(a.consumers))
        server.kill()
        server.wait()
    print(
        f"{readable} of {a.consumers} popped messages still readable from the consumers'"
        f" sockets after the kill; {left} left in the lists after a restart from the file"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
