"""How `devicefarm api` bears hostile clients: slow headers, a request flood, its log.

    python bench/api_abuse.py [--connections 3000] [--hold-s 30] [--flood-s 10]
                              [--db URL --broker URL] [-- SERVER FLAGS...]

Starts `devicefarm api` in a home of its own (an SQLite farm and the filesystem broker
unless --db and --broker are given), then:
1. the anchor: /v1/health's latency from 127.0.0.1 with nothing else going on;
2. slow clients: --connections connections from 127.0.0.2 that send half a request's
   headers and then one more header line every 5 s, never the blank line; meanwhile
   /v1/health is asked from 127.0.0.1 twice a second (5 s timeout). Prints how many
   connections the server still holds as time passes, and health's latency against the
   anchor;
3. a flood: 8 keep-alive connections from 127.0.0.3 asking with a wrong token as fast as
   they can for --flood-s, while 127.0.0.1 asks /v1/health; prints the answers by status;
4. the bytes the server's log grew by in each phase.
Flags after `--` go to `devicefarm api` (e.g. `-- --header-timeout-s 5`).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import http.client
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SLOW_FROM, PROBE_FROM, FLOOD_FROM = "127.0.0.2", "127.0.0.1", "127.0.0.3"
PROBE_TIMEOUT_S = 5.0
TRICKLE_S = 5.0
READY_S = 60.0


def cli(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "devicefarm", *args], env=env,
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"devicefarm {' '.join(args)}: {done.stdout}{done.stderr}")
    return done.stdout


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port: int, path: str, source: str, token: str | None = None) -> tuple[int, float]:
    """(status, seconds) of one request on a new connection; status 0: no answer."""
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, PROBE_TIMEOUT_S, (source, 0))
    try:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        conn.request("GET", path, headers=headers)
        status = conn.getresponse().status
    except OSError:
        status = 0
    finally:
        conn.close()
    return status, time.perf_counter() - start


class Prober(threading.Thread):
    """Asks /v1/health from 127.0.0.1 twice a second until stopped."""

    def __init__(self, port: int):
        super().__init__(daemon=True)
        self.port, self.stopped, self.samples = port, threading.Event(), []

    def run(self) -> None:
        while not self.stopped.is_set():
            self.samples.append(get(self.port, "/v1/health", PROBE_FROM))
            self.stopped.wait(0.5)

    def summary(self) -> str:
        ok = sorted(s for status, s in self.samples if status == 200)
        failed = len(self.samples) - len(ok)
        if not ok:
            return f"{len(self.samples)} asked, none answered 200"
        return (f"{len(self.samples)} asked, {failed} not 200; "
                f"median {statistics.median(ok) * 1e3:.1f} ms, max {ok[-1] * 1e3:.1f} ms")  # fmt: skip


async def slow_clients(port: int, count: int, hold_s: float) -> None:
    """Opens `count` connections that never finish their headers; prints how many the
    server still holds every 5 s."""
    open_ = gate = asyncio.Semaphore(256)
    writers: list[asyncio.StreamWriter] = []

    async def one() -> None:
        async with gate:
            try:
                _, w = await asyncio.wait_for(asyncio.open_connection(
                    "127.0.0.1", port, local_addr=(SLOW_FROM, 0)), 10)  # fmt: skip
            except (OSError, asyncio.TimeoutError):
                return
        w.write(b"GET /v1/health HTTP/1.1\r\nHost: bench\r\n")
        writers.append(w)

    start = time.monotonic()
    await asyncio.gather(*(one() for _ in range(count)))
    del open_
    print(f"  {len(writers)} of {count} connected in {time.monotonic() - start:.1f} s")
    while time.monotonic() - start < hold_s:
        await asyncio.sleep(TRICKLE_S)
        for w in writers:
            if not w.is_closing():
                w.write(b"X-Slow: 1\r\n")
        await asyncio.sleep(0.2)  # the writes that hit a closed socket fail
        held = sum(1 for w in writers if not _closed(w))
        print(f"  t={time.monotonic() - start:5.1f} s: the server holds {held} of {len(writers)}")
    for w in writers:
        w.close()


def _closed(w: asyncio.StreamWriter) -> bool:
    if w.is_closing():
        return True
    reader_eof = w.transport.get_protocol()._stream_reader  # type: ignore[attr-defined]
    return reader_eof is not None and reader_eof.at_eof()


def flood(port: int, seconds: float) -> collections.Counter[int]:
    """8 keep-alive connections asking with a wrong token for `seconds`; answers by status."""
    counts: collections.Counter[int] = collections.Counter()
    lock, deadline = threading.Lock(), time.monotonic() + seconds

    def worker() -> None:
        conn = None
        while time.monotonic() < deadline:
            try:
                conn = conn or http.client.HTTPConnection("127.0.0.1", port, 5, (FLOOD_FROM, 0))
                conn.request("GET", "/v1/campaigns", headers={"Authorization": "Bearer wrong"})
                response = conn.getresponse()
                response.read()
                status = response.status
                if response.getheader("connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except OSError:
                status, conn = 0, None
            with lock:
                counts[status] += 1

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return counts


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--connections", type=int, default=3000)
    p.add_argument("--hold-s", type=float, default=30.0)
    p.add_argument("--flood-s", type=float, default=10.0)
    p.add_argument("--db")
    p.add_argument("--broker")
    p.add_argument("server_args", nargs="*", help="flags for devicefarm api (after --)")
    args = p.parse_args()

    home = Path(tempfile.mkdtemp(prefix="api-abuse-"))
    env = os.environ | {"DEVICEFARM_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    services = (["--db", args.db] if args.db else []) + (
        ["--broker", args.broker] if args.broker else []
    )
    cli(env, "db", "upgrade", *services[:2])
    tokens = home / "tokens.json"
    cli(env, "api", "token", "add", "bench", "--role", "read", "--tokens", str(tokens))
    port, log = free_port(), home / "api.log"
    server = subprocess.Popen(
        [sys.executable, "-m", "devicefarm", "api", "--port", str(port), "--tokens", str(tokens),
         *services, *args.server_args],
        env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + READY_S
        while get(port, "/v1/health", PROBE_FROM)[0] != 200:
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"devicefarm api did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.3)
        anchor = sorted(get(port, "/v1/health", PROBE_FROM)[1] for _ in range(20))
        anchor_ms = statistics.median(anchor) * 1e3
        print(f"devicefarm api {' '.join(args.server_args)} (log {log})")
        print(f"anchor: /v1/health median {anchor_ms:.1f} ms (20 asked, nothing else going on)")
        sizes = [log.stat().st_size]

        print(f"slow clients: {args.connections} connections from {SLOW_FROM}, "
              f"headers never finished, held for {args.hold_s:g} s")  # fmt: skip
        prober = Prober(port)
        prober.start()
        asyncio.run(slow_clients(port, args.connections, args.hold_s))
        prober.stopped.set()
        prober.join()
        print(f"  /v1/health meanwhile: {prober.summary()}")
        ok = [s for status, s in prober.samples if status == 200]
        if ok:
            print(f"  ratio to the anchor: {statistics.median(ok) * 1e3 / anchor_ms:.2f}x median")
        sizes.append(log.stat().st_size)

        print(f"flood: 8 keep-alive connections from {FLOOD_FROM}, wrong token, {args.flood_s:g} s")
        prober = Prober(port)
        prober.start()
        counts = flood(port, args.flood_s)
        prober.stopped.set()
        prober.join()
        answers = ", ".join(
            f"{n} x {status or 'no answer'}" for status, n in sorted(counts.items())
        )
        print(f"  answers: {answers} ({sum(counts.values()) / args.flood_s:.0f} a second)")
        print(f"  /v1/health from {PROBE_FROM} meanwhile: {prober.summary()}")
        time.sleep(1.0)
        sizes.append(log.stat().st_size)
        print(f"log: {sizes[1] - sizes[0]} bytes during the slow clients, "
              f"{sizes[2] - sizes[1]} during the flood ({sizes[2]} in all)")  # fmt: skip
    finally:
        server.terminate()
        server.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
