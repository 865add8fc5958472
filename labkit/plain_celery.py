"""Plain Celery, the anchor of the farm's throughput: worker processes running a no-op
task that counts itself in Redis, with the farm's app settings (farm_core.celery_app).

    python -m labkit.plain_celery --broker URL --queue Q [--pool threads] [--concurrency N]

runs one worker; `PlainCelery` starts several, one queue each, and times a batch of tasks
spread over their queues, from the first send to the last task counted.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from .processes import kill_group, wait_until

TASK = "labkit.noop"
COUNTER = "labkit:noop:done"
ROOT = Path(__file__).resolve().parents[1]
#: Every worker answers within this long of its start.
READY_S = 120.0

_client = None


def noop_app(broker_url: str):
    """The farm's Celery app with one task: INCR COUNTER."""
    from farm_core.celery_app import make_app

    app = make_app(broker_url, name="plain")

    @app.task(name=TASK)
    def noop() -> None:
        global _client
        if _client is None:
            import redis

            _client = redis.Redis.from_url(broker_url)
        _client.incr(COUNTER)

    return app


class PlainCelery:
    """`workers` plain Celery workers on queues of their own; `pool` and `concurrency` as
    Celery's worker flags."""

    def __init__(self, broker_url: str, workers: int, log: Path, pool: str, concurrency: int):
        import redis

        self.broker_url = broker_url
        self.queues = [f"plain.q{i}" for i in range(workers)]
        self.client = redis.Redis.from_url(broker_url)
        self.app = noop_app(broker_url)
        cmd = [sys.executable, "-m", "labkit.plain_celery", "--broker", broker_url]
        cmd += ["--pool", pool, "--concurrency", str(concurrency)]
        self.procs = [
            subprocess.Popen(
                [*cmd, "--queue", q],
                stdout=log.open("a"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=ROOT,
            )
            for q in self.queues
        ]
        self.run(len(self.queues) * 2, READY_S)  # warm-up: every worker is up

    def run(self, tasks: int, timeout_s: float = 600.0) -> float:
        """Tasks per second, from the first send to the last task counted."""
        self.client.delete(COUNTER)
        start = time.perf_counter()
        with self.app.producer_or_acquire() as producer:
            for i in range(tasks):
                self.app.send_task(TASK, queue=self.queues[i % len(self.queues)], producer=producer)
        wait_until(
            lambda: int(self.client.get(COUNTER) or 0) >= tasks, timeout_s, "plain Celery", 0.01
        )
        return tasks / (time.perf_counter() - start)

    def close(self) -> None:
        import signal

        for proc in self.procs:
            kill_group(proc, signal.SIGTERM)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m labkit.plain_celery")
    p.add_argument("--broker", required=True)
    p.add_argument("--queue", required=True)
    p.add_argument("--pool", default="threads")
    p.add_argument("--concurrency", type=int, default=1)
    args = p.parse_args(argv)
    noop_app(args.broker).worker_main(
        ["--quiet", "worker", "--queues", args.queue, "--pool", args.pool]
        + ["--concurrency", str(args.concurrency), "--hostname", f"{args.queue}@plain"]
        + ["--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel", "INFO"]
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
