"""A reconciler pass with a backlog of jobs whose devices are gone, on PostgreSQL.

    python bench/reconcile_backlog.py [--jobs 10000] [--devices 1000] [--passes 3]

A fresh database (dropped after) gets `--devices` no-op devices and a campaign of `--jobs`
jobs on them; then every device falls silent and the jobs wait past the dispatch grace.
Each pass (`orchestrator.reconciler.reconcile`) is timed with its statements counted: the
first marks the devices offline and the jobs waiting, the next find nothing to do but must
read the backlog, then the devices come back and a pass places every job. The anchor, in
the same run, is one `SELECT count(*)` over the jobs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from sqlalchemy import event, func, select, update

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

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

    def send(self, orders: list[SendOrder]) -> tuple[list[SendOrder], str]:  # type: ignore[override]
        return list(orders), ""


def timed_pass(engine, now) -> tuple[float, int, object]:
    count = [0]

    def note(*_a: object) -> None:
        count[0] += 1

    event.listen(engine, "before_cursor_execute", note)
    start = time.perf_counter()
    report = reconcile(engine, Unsent(), lambda: set(), TIMING, now=now)
    took = time.perf_counter() - start
    event.remove(engine, "before_cursor_execute", note)
    return took, count[0], report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--devices", type=int, default=1_000)
    ap.add_argument("--passes", type=int, default=3)
    a = ap.parse_args()
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
            c.execute(update(Job).values(state=QUEUED, updated_at=now))
            c.execute(update(Device).values(last_seen=silent))
        later = now + timedelta(seconds=1)
        with engine.connect() as c:
            start = time.perf_counter()
            total = c.execute(select(func.count()).select_from(Job)).scalar_one()
            anchor = time.perf_counter() - start
        print(f"anchor: SELECT count(*) over {total} jobs: {anchor * 1e3:.1f} ms")
        print("| pass | devices | s | statements | x anchor | what it did |")
        print("| --- | --- | --- | --- | --- | --- |")
        for k in range(a.passes):
            took, statements, r = timed_pass(engine, later + timedelta(seconds=k))
            did = f"offline {len(r.went_offline)}, sent {r.sent}, expired {len(r.expired)}"
            print(f"| {k + 1} | gone | {took:.2f} | {statements} | {took / anchor:.0f} | {did} |")
        back = later + timedelta(seconds=a.passes)
        with engine.begin() as c:
            c.execute(update(Device).values(last_seen=back, state="online"))
        took, statements, r = timed_pass(engine, back)
        print(f"| {a.passes + 1} | back | {took:.2f} | {statements} | {took / anchor:.0f} "
              f"| sent {r.sent} |")  # fmt: skip
        engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
