"""The queue fill's first read (farm_core.queue_state.read) against a device's backlog.

    python bench/fill_read.py [--backlogs 500,2000,5000] [--reads 50]

For each backlog: a fresh PostgreSQL database on 127.0.0.1:5432, one no-op device, a
campaign of that many jobs on it (8 sent, the rest queued), then `--reads` reads timed on
one connection, before and after ANALYZE; the anchor is `SELECT count(*)` of the device's
active jobs on the same connection (the least a read of every queued job can cost), and the
ratio is the read's time over it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import create_engine, func, select, text

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from farm_core import queue_state  # noqa: E402
from farm_core.database import make_engine, open_database  # noqa: E402
from farm_core.schema import DISPATCHED, QUEUED, RUNNING, Job  # noqa: E402
from labkit.farm_rows import add_device, write_model  # noqa: E402

ADMIN = "postgresql+psycopg2://postgres@127.0.0.1:5432/postgres"
KEY = "noop:a"
COUNT = (
    select(func.count())
    .select_from(Job)
    .where(Job.device_key == KEY, Job.state.in_((QUEUED, DISPATCHED, RUNNING)))
)


class Unsent:
    """A broker that takes every message (no worker runs here)."""

    def send(self, orders, per_message: int = 1):
        return list(orders), ""


def timed(fn, reads: int) -> float:
    for _ in range(5):
        fn()
    start = time.perf_counter()
    for _ in range(reads):
        fn()
    return (time.perf_counter() - start) / reads * 1000


def one_backlog(jobs: int, reads: int, folder: Path) -> None:
    from orchestrator.submit import submit

    admin = create_engine(ADMIN, isolation_level="AUTOCOMMIT")
    name = f"fill_read_{uuid.uuid4().hex[:8]}"
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    url = f"postgresql://postgres@127.0.0.1:5432/{name}"
    try:
        open_database(url).dispose()
        engine = make_engine(url)
        add_device(engine, KEY)
        models = [write_model(folder / f"m{i}.tflite", 1.0 + i) for i in range(jobs)]
        submit(engine, Unsent(), models, f"key={KEY}", "cpu")
        for analyzed in (False, True):
            if analyzed:
                with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
                    c.execute(text("ANALYZE"))
            with engine.connect() as c:
                read_ms = timed(lambda c=c: queue_state.read(c, [KEY], 8, datetime.now(UTC)), reads)
                count_ms = timed(lambda c=c: c.execute(COUNT).scalar(), reads)
            stats = "analyzed" if analyzed else "statistics unset"
            print(
                f"backlog {jobs:6d} ({stats:16s}): read {read_ms:6.2f} ms, "
                f"anchor count(*) {count_ms:6.2f} ms, ratio {read_ms / count_ms:5.2f}"
            )
        engine.dispose()
    finally:
        with admin.connect() as c:
            c.execute(
                text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname=:n"),
                {"n": name},
            )
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        admin.dispose()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backlogs", default="500,2000,5000")
    p.add_argument("--reads", type=int, default=50)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for jobs in (int(b) for b in args.backlogs.split(",")):
            folder = Path(tmp) / str(jobs)
            folder.mkdir()
            one_backlog(jobs, args.reads, folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
