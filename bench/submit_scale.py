"""A 100,000-job campaign submitted on PostgreSQL with Redis as broker (issue 44: <= 30 s).

    python bench/submit_scale.py [--models 100] [--devices 1000] [--broker redis://...]

A fresh database (dropped after) gets `--devices` no-op devices; `--models` distinct models
on the `cpu` configuration make models x devices jobs. The campaign is submitted twice:
once through `orchestrator.submit.submit` (the function the CLI and the API call, timed by
phase with its statements counted), once through `devicefarm submit` in a subprocess (the
whole command, interpreter start included), each into its own fresh database. The broker
is a private redis-server on a free port unless `--broker` names one. No anchor applies:
it prints seconds, jobs per second and the goal.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, event, func, select

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from farm_core.database import open_database  # noqa: E402
from farm_core.schema import DISPATCHED, Job  # noqa: E402
from labkit.scratch_db import scratch_database  # noqa: E402

SERVER = "postgresql+psycopg2://postgres:postgres@127.0.0.1:5432"
GOAL_S = 30.0


@contextmanager
def private_redis() -> Iterator[str]:
    """A throwaway redis-server (no persistence) on a free port; its URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [shutil.which("redis-server") or "redis-server", "--port", str(port), "--save", "",
         "--appendonly", "no", "--bind", "127.0.0.1"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        import redis

        client = redis.Redis(port=port)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(10)


def check(url: str, broker: str, jobs: int) -> str:
    """Every job stored, the dispatched ones each in the broker exactly once."""
    import redis

    engine = create_engine(url)
    with engine.connect() as c:
        stored = c.execute(select(func.count()).select_from(Job)).scalar_one()
        out = c.execute(
            select(func.count()).select_from(Job).where(Job.state == DISPATCHED)
        ).scalar_one()
    engine.dispose()
    client = redis.Redis.from_url(broker)
    keys = list(client.scan_iter("df.noop*"))  # each queue, one list per priority
    queued = sum(client.llen(k) for k in keys)
    if keys:
        client.delete(*keys)
    if stored != jobs or queued != out:
        raise SystemExit(f"stored {stored} of {jobs} jobs; {out} dispatched, {queued} in Redis")
    return f"{stored} stored, {out} sent (each in Redis once)"


def in_process(url: str, broker: str, paths: list[Path], jobs: int) -> float:
    from farm_core.dispatch import CeleryDispatcher
    from orchestrator.submit import submit

    engine = open_database(url)
    statements = [0]
    event.listen(
        engine, "before_cursor_execute", lambda *a: statements.__setitem__(0, statements[0] + 1)
    )
    dispatcher = CeleryDispatcher(broker)
    start = time.perf_counter()
    sub = submit(engine, dispatcher, paths, "kind=noop", "cpu")
    took = time.perf_counter() - start
    dispatcher.close()
    engine.dispose()
    print(f"submit(): {sub.jobs} jobs in {took:.2f} s ({sub.jobs / took:,.0f} jobs/s), "
          f"{statements[0]} statements; {check(url, broker, jobs)}")  # fmt: skip
    return took


def cli(url: str, broker: str, paths: list[Path], jobs: int) -> float:
    cmd = [sys.executable, "-m", "devicefarm", "submit", *map(str, paths), "--devices",
           "kind=noop", "--configs", "cpu", "--db", url, "--broker", broker]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    took = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"devicefarm submit failed ({done.returncode}): {done.stderr[-2000:]}")
    print(f"devicefarm submit: {jobs} jobs in {took:.2f} s ({jobs / took:,.0f} jobs/s); "
          f"{check(url, broker, jobs)}")  # fmt: skip
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=100)
    ap.add_argument("--devices", type=int, default=1000)
    ap.add_argument("--broker", default="", help="a Redis URL (default: a private server)")
    a = ap.parse_args()
    jobs = a.models * a.devices
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}; {jobs:,} jobs "
          f"({a.models} models x {a.devices} devices); goal {GOAL_S:.0f} s")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        from delegate_runtime.examples import scaled_model

        paths = []
        for i in range(a.models):
            p = Path(tmp) / f"m{i:03d}.tflite"
            p.write_bytes(scaled_model(1.0 + i))
            paths.append(p)
        with private_redis() if not a.broker else _given(a.broker) as broker:
            with scratch_database("bench_submit", a.devices, SERVER) as url:
                fn = in_process(url, broker, paths, jobs)
            with scratch_database("bench_submit", a.devices, SERVER) as url:
                whole = cli(url, broker, paths, jobs)
    worst = max(fn, whole)
    print(
        f"slowest: {worst:.2f} s ({'within' if worst <= GOAL_S else 'over'} the {GOAL_S:.0f} s goal)"
    )
    return 0 if worst <= GOAL_S else 1


@contextmanager
def _given(url: str) -> Iterator[str]:
    yield url


if __name__ == "__main__":
    sys.exit(main())
