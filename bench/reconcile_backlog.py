"""A reconciler pass with a backlog of jobs whose devices are gone, on PostgreSQL.

    python bench/reconcile_backlog.py [--jobs 10000] [--devices 1000] [--passes 3]
        [--redis] [--lose 1200] [--dispatched] [--silent N]

A fresh database (dropped after) gets `--devices` no-op devices and a campaign of `--jobs`
jobs on them; then every device falls silent and the jobs wait past the dispatch grace.
Each pass (`orchestrator.reconciler.reconcile`) is timed with its statements counted: the
first marks the devices offline and the jobs waiting, the next find nothing to do but must
read the backlog, then the devices come back and a pass places every job. The anchor, in
the same run, is one `SELECT count(*)` over the jobs.

`--dispatched` leaves the jobs as submission left them (each device's queue sent, the rest
queued) when the devices fall silent: the first pass moves the dispatched ones off them.
`--silent N`: only N devices fall silent (a host gone), the others stay live and take
their jobs: the first pass moves and places them, as the fleet bench's killed agent makes
it do.
`--redis` sends for real, to a private redis-server (the farm's dispatcher and probe), and
adds two passes after `--lose` of the sent messages were taken out of Redis, as a broker
restart left them in the fleet bench: the first finds them missing, the second, as long
after as `lost_confirm_s`, calls them lost, queues them again and sends them. Each pass prints its phases (ReconcileReport.phases).
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from sqlalchemy import event, func, select, update

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from farm_core.celery_app import QUEUE_PREFIX  # noqa: E402
from farm_core.database import open_database  # noqa: E402
from farm_core.dispatch import Dispatcher, SendOrder  # noqa: E402
from farm_core.schema import QUEUED, Device, Job, utcnow  # noqa: E402
from farm_core.settings import Timing  # noqa: E402
from labkit.scratch_db import scratch_database  # noqa: E402
from orchestrator.reconciler import reconcile  # noqa: E402
from orchestrator.submit import submit  # noqa: E402

SERVER = "postgresql+psycopg2://postgres:postgres@127.0.0.1:5432"
TIMING = Timing(dispatch_grace_s=0, offline_after_s=30, device_gone_s=3600)


class Unsent(Dispatcher):
    """A broker that takes every message (none goes anywhere: no worker runs here)."""

    def send(  # type: ignore[override]
        self, orders: list[SendOrder], per_message: int = 1
    ) -> tuple[list[SendOrder], str]:
        return list(orders), ""


def timed_pass(engine, now, dispatcher=None, probe=None) -> tuple[float, int, object]:
    count = [0]

    def note(*_a: object) -> None:
        count[0] += 1

    event.listen(engine, "before_cursor_execute", note)
    start = time.perf_counter()
    report = reconcile(
        engine, dispatcher or Unsent(), probe or (lambda queues=None: set()), TIMING, now=now
    )
    took = time.perf_counter() - start
    event.remove(engine, "before_cursor_execute", note)
    return took, count[0], report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--devices", type=int, default=1_000)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--redis", action="store_true", help="send to a private redis-server")
    ap.add_argument("--lose", type=int, default=1200, help="with --redis: messages lost")
    ap.add_argument(
        "--dispatched",
        action="store_true",
        help="the devices fall silent with their jobs as submitted (8 dispatched each)",
    )
    ap.add_argument("--silent", type=int, default=None, help="devices that fall silent (all)")
    a = ap.parse_args()
    with contextlib.ExitStack() as stack:
        broker = stack.enter_context(private_redis()) if a.redis else None
        return run(a, broker)


@contextlib.contextmanager
def private_redis():
    from labkit.processes import free_port
    from labkit.redis_server import RedisServer

    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(free_port(), Path(tmp))
        server.start()
        try:
            yield server.url
        finally:
            server.stop()


def phases(report) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in report.phases.items() if v >= 0.005)


def lose(broker: str, count: int) -> int:
    """Take `count` messages out of the device queues' lists at random; how many went."""
    import redis

    client = redis.Redis.from_url(broker)
    lists = [k for k in client.scan_iter(match=QUEUE_PREFIX + "*") if client.type(k) == b"list"]
    gone = 0
    random.seed(7)
    while gone < count and lists:
        key = random.choice(lists)
        if client.rpop(key) is None:
            lists.remove(key)
            continue
        gone += 1
    return gone


def run(a: argparse.Namespace, broker: str | None) -> int:
    dispatcher = probe = None
    if broker:
        from farm_core.dispatch import CeleryDispatcher
        from orchestrator.probes import probe_for

        dispatcher, probe = CeleryDispatcher(broker), probe_for(broker)
    with scratch_database("bench_reconcile", a.devices, SERVER) as url:
        engine = open_database(url)
        now = utcnow()
        with tempfile.TemporaryDirectory() as tmp:
            from delegate_runtime.examples import scaled_model

            per_device = max(a.jobs // a.devices, 1)
            paths = []
            for i in range(per_device):
                p = Path(tmp) / f"m{i}.tflite"
                p.write_bytes(scaled_model(1.0 + i))
                paths.append(p)
            start = time.perf_counter()
            submit(engine, Unsent(), paths, "kind=noop", "cpu", timing=TIMING)
            print(f"submitted {per_device * a.devices} jobs in {time.perf_counter() - start:.1f} s")
        silent = now - timedelta(seconds=60)
        with engine.begin() as c:
            if not a.dispatched:
                c.execute(update(Job).values(state=QUEUED, updated_at=now))
            keys = sorted(c.execute(select(Device.key)).scalars())
            gone = keys[: a.silent] if a.silent is not None else keys
            c.execute(update(Device).where(Device.key.in_(gone)).values(last_seen=silent))
            c.execute(update(Device).where(Device.key.notin_(gone)).values(last_seen=now))
        later = now + timedelta(seconds=1)
        with engine.connect() as c:
            start = time.perf_counter()
            total = c.execute(select(func.count()).select_from(Job)).scalar_one()
            anchor = time.perf_counter() - start
        print(f"anchor: SELECT count(*) over {total} jobs: {anchor * 1e3:.1f} ms")
        print("| pass | devices | s | statements | x anchor | what it did | phases, s |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for k in range(a.passes):
            took, statements, r = timed_pass(
                engine, later + timedelta(seconds=k), dispatcher, probe
            )
            did = f"offline {len(r.went_offline)}, sent {r.sent}, expired {len(r.expired)}"
            print(f"| {k + 1} | gone | {took:.2f} | {statements} | {took / anchor:.0f} | {did} "
                  f"| {phases(r)} |")  # fmt: skip
        back = later + timedelta(seconds=a.passes)
        with engine.begin() as c:
            c.execute(update(Device).values(last_seen=back, state="online"))
        took, statements, r = timed_pass(engine, back, dispatcher, probe)
        print(f"| {a.passes + 1} | back | {took:.2f} | {statements} | {took / anchor:.0f} "
              f"| sent {r.sent} | {phases(r)} |")  # fmt: skip
        if broker:
            gone = lose(broker, a.lose)
            # lost once every probe lacked them for lost_confirm_s: first seen missing, then
            # that long later
            for k, after in enumerate((1.0, 1.0 + TIMING.lost_confirm_s)):
                again = back + timedelta(seconds=after)
                with engine.begin() as c:
                    c.execute(update(Device).values(last_seen=again))
                took, statements, r = timed_pass(engine, again, dispatcher, probe)
                print(f"| {a.passes + 2 + k} | {gone} messages lost, +{after:g} s | {took:.2f} "
                      f"| {statements} | {took / anchor:.0f} | re-queued "
                      f"{len(r.resent_lost_message)}, sent {r.sent} | {phases(r)} |")  # fmt: skip
        engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
