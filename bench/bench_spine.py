"""The farm spine's own overhead, against plain Celery on the same Redis, in one run.

    python bench/bench_spine.py [--jobs 2000] [--devices 2] [--group-devices N]
                                [--db postgresql://...|sqlite]

1. Throughput: `--jobs` no-op jobs end to end through the whole spine (validation, SQL rows,
   Celery messages, a real agent with one Celery worker per no-op device, claim, result
   write) against the same number of plain Celery no-op tasks (same app settings, same
   number of worker processes and queues, each task one Redis INCR so the end can be seen)
   on the same redis-server. Prints both rates and the ratio (target, issue 44: at least
   0.8). `--group-devices N` has the agent serve the no-op devices N to a device group
   process (worker_agent.group) instead of a Celery consumer process each; the baseline
   stays a prefork Celery worker per queue.
2. Scale: a 10,000-job campaign (100 models x 100 registered devices) validated, stored and
   queued (target: under 30 s).

It starts its own redis-server on a free port and, unless --db says otherwise, a fresh
PostgreSQL database on 127.0.0.1:5432 (falling back to SQLite when none is reachable).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from farm_core.celery_app import make_app, prepare_broker  # noqa: E402
from labkit.processes import free_port  # noqa: E402
from labkit.redis_server import RedisServer  # noqa: E402

#: Targets from the issue.
TARGET_RATIO = 0.8
TARGET_CAMPAIGN_S = 30.0
BASELINE_TASK = "bench.noop"
BASELINE_COUNTER = "bench:done"
PG_ADMIN = "postgresql+psycopg2://postgres@127.0.0.1:5432/postgres"
READY_S = 60.0

_redis_client = None


def _noop_app(broker_url: str):
    app = make_app(broker_url, name="bench")

    @app.task(name=BASELINE_TASK)
    def noop() -> None:
        global _redis_client
        if _redis_client is None:
            import redis

            _redis_client = redis.Redis.from_url(broker_url)
        _redis_client.incr(BASELINE_COUNTER)

    return app


def baseline_worker(queue: str, broker_url: str) -> None:
    """A plain Celery worker with the spine's worker flags (prefork, 1 child, prefetch 1)."""
    app = _noop_app(broker_url)
    app.worker_main(
        [
            "--quiet",
            "worker",
            "--queues",
            queue,
            "--concurrency",
            "1",
            "--pool",
            "prefork",
            "--hostname",
            f"{queue}@bench",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--loglevel",
            "INFO",
        ]
    )


def wait(check, timeout_s: float, what: str, every_s: float = 0.05):
    deadline = time.monotonic() + timeout_s
    while not (got := check()):
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(every_s)
    return got


def make_database(choice: str, workdir: Path) -> tuple[str, object]:
    """A database URL and a function that drops it afterwards."""
    if choice.startswith(("postgresql://", "postgresql+", "sqlite:")):
        return choice, lambda: None
    if choice == "postgresql":
        from sqlalchemy import create_engine, text

        admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
        name = f"devicefarm_bench_{uuid.uuid4().hex[:8]}"
        try:
            with admin.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
        except Exception as exc:  # noqa: BLE001 - fall back to SQLite, and say so
            print(f"PostgreSQL unavailable ({type(exc).__name__}); using SQLite")
            return f"sqlite:///{workdir / 'farm.db'}", lambda: None

        def drop() -> None:
            with admin.connect() as conn:
                conn.execute(
                    text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname=:n"),
                    {"n": name},
                )
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))

        return f"postgresql://postgres@127.0.0.1:5432/{name}", drop
    return f"sqlite:///{workdir / 'farm.db'}", lambda: None


def write_models(folder: Path, n: int) -> list[Path]:
    from labkit.farm_rows import write_model

    folder.mkdir(parents=True, exist_ok=True)
    return [write_model(folder / f"m{i}.tflite", 1.0 + i) for i in range(n)]


class CeleryBaseline:
    """Plain Celery workers (one per queue) running a no-op task; measured on demand."""

    def __init__(self, broker_url: str, n_queues: int, workdir: Path):
        import redis

        self.queues = [f"bench.q{i}" for i in range(n_queues)]
        self.client = redis.Redis.from_url(broker_url)
        self.app = _noop_app(broker_url)
        log = workdir / "baseline.log"
        self.procs = [
            subprocess.Popen(
                [sys.executable, __file__, "--baseline-worker", q, "--broker", broker_url],
                stdout=log.open("a"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            for q in self.queues
        ]
        self.run(len(self.queues), READY_S)  # warm-up: every worker is up

    def run(self, n_jobs: int, timeout_s: float = 600) -> float:
        """Tasks per second, from the first send to the last task done."""
        self.client.delete(BASELINE_COUNTER)
        start = time.perf_counter()
        with self.app.producer_or_acquire() as producer:
            for i in range(n_jobs):
                self.app.send_task(
                    BASELINE_TASK, queue=self.queues[i % len(self.queues)], producer=producer
                )
        wait(
            lambda: int(self.client.get(BASELINE_COUNTER) or 0) >= n_jobs,
            timeout_s,
            "Celery tasks",
            0.01,
        )
        return n_jobs / (time.perf_counter() - start)

    def close(self) -> None:
        for p in self.procs:
            os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            p.wait()


def _ended(engine, campaign_id: int) -> int:
    from sqlalchemy import func, select

    from farm_core.schema import TERMINAL_STATES, Job

    with engine.begin() as conn:
        return conn.execute(
            select(func.count())
            .select_from(Job)
            .where(Job.campaign_id == campaign_id, Job.state.in_(TERMINAL_STATES))
        ).scalar()


class Spine:
    """A real agent serving no-op devices; each run submits one campaign through the spine."""

    def __init__(
        self,
        db_url: str,
        broker_url: str,
        n_devices: int,
        n_jobs: int,
        workdir: Path,
        group_devices: int = 0,
    ):
        from farm_core.database import open_database
        from farm_core.dispatch import CeleryDispatcher
        from orchestrator.submit import RunSettings
        from worker_agent.agent import Agent
        from worker_agent.discovery import discover

        os.environ["DEVICEFARM_HOME"] = str(workdir / "home")
        devices = discover([f"noop:bench{i}" for i in range(n_devices)])
        n_models = max(1, round(n_jobs / (n_devices * 3)))
        self.models = write_models(workdir / "spine-models", n_models)
        self.engine = open_database(db_url)
        self.settings = RunSettings(num_runs=1, diff_runs=0)
        self.agent = Agent(
            db_url,
            broker_url,
            devices,
            name="bench",
            log_dir=workdir / "logs",
            group_devices=group_devices,
        )
        self.agent.start(canary=False)
        self.dispatcher = CeleryDispatcher(broker_url)
        self._campaign(self.models[:1], "cpu", READY_S)  # warm-up: every consumer is up

    def _campaign(self, models: list[Path], configs: str, timeout_s: float):
        from orchestrator.submit import submit

        sub = submit(self.engine, self.dispatcher, models, "kind=noop", configs, self.settings)
        wait(lambda: _ended(self.engine, sub.campaign_id) >= sub.jobs, timeout_s, "jobs", 0.05)
        return sub

    def run(self) -> tuple[float, int, int]:
        """Jobs per second from submission to the last job ended; jobs; successful results."""
        from sqlalchemy import func, select

        from farm_core.schema import Result

        start = time.perf_counter()
        sub = self._campaign(self.models, "cpu,gpu-fp32,gpu-fp16", 600)
        rate = sub.jobs / (time.perf_counter() - start)
        with self.engine.begin() as conn:
            results = conn.execute(
                select(func.count())
                .select_from(Result)
                .where(Result.campaign_id == sub.campaign_id, Result.outcome == "succeeded")
            ).scalar()
        return rate, sub.jobs, results

    def close(self) -> None:
        self.agent.stop()
        self.dispatcher.close()
        self.engine.dispose()


def bench_campaign(db_url: str, broker_url: str, workdir: Path) -> tuple[float, int]:
    """Seconds to validate, store and queue 100 models x 100 registered devices."""
    import redis

    from farm_core.database import open_database
    from farm_core.dispatch import CeleryDispatcher
    from labkit.farm_rows import add_device
    from orchestrator.submit import submit

    engine = open_database(db_url)
    for i in range(100):
        add_device(engine, f"noop:campaign{i:03d}", tags=["campaign"])
    models = write_models(workdir / "campaign-models", 100)
    dispatcher = CeleryDispatcher(broker_url)
    start = time.perf_counter()
    sub = submit(engine, dispatcher, models, "tag=campaign", "cpu")
    elapsed = time.perf_counter() - start
    dispatcher.close()
    queued = sum(
        redis.Redis.from_url(broker_url).llen(k)
        for k in redis.Redis.from_url(broker_url).scan_iter("df.noop-3acampaign*")
    )
    engine.dispose()
    assert sub.jobs == 10_000 and sub.sent > 0, sub  # the rest wait for their device's queue
    return elapsed, queued


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=1200, help="jobs (and tasks) per round")
    p.add_argument("--devices", type=int, default=2, help="no-op devices = Celery workers")
    p.add_argument("--rounds", type=int, default=5, help="interleaved measurement rounds")
    p.add_argument(
        "--group-devices",
        type=int,
        default=0,
        help="serve the no-op devices N to a device group process (0: a consumer each)",
    )
    p.add_argument("--db", default="postgresql", help="postgresql (fresh DB), sqlite, or a URL")
    p.add_argument("--baseline-worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--broker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.baseline_worker:
        baseline_worker(args.baseline_worker, args.broker)
        return 0
    with tempfile.TemporaryDirectory(prefix="bench_spine_") as tmp:
        workdir = Path(tmp)
        redis_server = RedisServer(free_port(), workdir)
        redis_server.start()
        broker_url = redis_server.url
        db_url, drop = make_database(args.db, workdir)
        prepare_broker(broker_url)
        try:
            print(
                f"broker {broker_url}; database {db_url.split('@')[-1]}; "
                f"{args.devices} devices/workers; {args.jobs} jobs; "
                f"spine: {f'groups of {args.group_devices}' if args.group_devices else 'a consumer process per device'}"
            )
            baseline = CeleryBaseline(broker_url, args.devices, workdir)
            spine = Spine(db_url, broker_url, args.devices, args.jobs, workdir, args.group_devices)
            ratios = []
            try:
                for r in range(args.rounds):  # interleaved: both see the same machine load
                    if r % 2:  # alternate which goes first
                        spine_rate, jobs, results = spine.run()
                        celery_rate = baseline.run(args.jobs)
                    else:
                        celery_rate = baseline.run(args.jobs)
                        spine_rate, jobs, results = spine.run()
                    ratios.append(spine_rate / celery_rate)
                    print(
                        f"round {r + 1}: Celery {celery_rate:7.1f} tasks/s, spine "
                        f"{spine_rate:7.1f} jobs/s ({results}/{jobs} results), "
                        f"ratio {ratios[-1]:.2f}"
                    )
            finally:
                spine.close()
                baseline.close()
            ratio = statistics.median(ratios)
            verdict = "ok" if ratio >= TARGET_RATIO else "BELOW TARGET"
            print(f"median ratio spine/Celery: {ratio:.2f} (target >= {TARGET_RATIO}) {verdict}")
            elapsed, queued = bench_campaign(db_url, broker_url, workdir)
            verdict = "ok" if elapsed < TARGET_CAMPAIGN_S else "OVER TARGET"
            print(
                f"10,000-job campaign      : {elapsed:8.2f} s validated, stored and queued "
                f"({queued} messages in Redis; target < {TARGET_CAMPAIGN_S:g} s) {verdict}"
            )
        finally:
            redis_server.stop()
            drop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
