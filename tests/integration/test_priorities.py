"""User priorities 0-9 are ten levels on Redis (issue 17): jobs sent through the farm's
dispatcher while no worker runs are consumed by a real Celery worker, started afterwards,
most urgent first, in send order within a priority.

kombu's Redis transport rounds priorities to its steps ([0, 3, 6, 9] unless
`priority_steps` is set); with those four steps, 7 and 8 would run in send order with 9.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import redis

from farm_core.celery_app import queue_for
from farm_core.dispatch import CeleryDispatcher, SendOrder
from tests.support.farm import kill_group, wait_until

REPO = Path(__file__).resolve().parents[2]
DEVICE = "noop:priorities"
#: Redis list the worker's task appends each job id to, in the order it ran them.
DONE_KEY = "test:priorities:done"
#: A Celery worker on the farm's app whose run_job task only records the job id.
WORKER = """
import sys
import redis
from farm_core.celery_app import TASK_RUN_JOB, make_app, queue_for
url, device, done = sys.argv[1:4]
app = make_app(url)
client = redis.Redis.from_url(url)

@app.task(name=TASK_RUN_JOB)
def run_job(job_id, attempt):
    client.rpush(done, job_id)

app.worker_main(["worker", "-Q", queue_for(device), "--pool", "solo", "--loglevel",
                 "WARNING", "--without-heartbeat", "--without-gossip", "--without-mingle"])
"""
PER_PRIORITY = 2


def job_id(priority: int, nth: int) -> int:
    """Job ids that say their priority and send order (priority 7, 2nd: 71)."""
    return priority * 10 + nth


def send_all(redis_url: str) -> None:
    # least urgent first, so FIFO order would be the reverse of the expected one
    orders = [
        SendOrder(job_id(p, n), 1, DEVICE, priority=p)
        for p in range(10)
        for n in range(PER_PRIORITY)
    ]
    sent, error = CeleryDispatcher(redis_url).send(orders)
    assert not error and len(sent) == len(orders)


def test_ten_priority_levels_on_redis(redis_url: str, tmp_path: Path) -> None:
    client = redis.Redis.from_url(redis_url)
    send_all(redis_url)
    queue = queue_for(DEVICE)
    lists = {k.decode() for k in client.scan_iter(match=f"{queue}*")}
    assert len(lists) == 10, sorted(lists)  # one Redis list per priority
    log = (tmp_path / "worker.log").open("w")
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, redis_url, DEVICE, DONE_KEY],
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    total = 10 * PER_PRIORITY
    try:
        wait_until(lambda: client.llen(DONE_KEY) >= total, 60, "the worker to run every job")
    finally:
        kill_group(worker)
        log.close()
    ran = [int(x) for x in client.lrange(DONE_KEY, 0, -1)]
    expected = [job_id(p, n) for p in reversed(range(10)) for n in range(PER_PRIORITY)]
    assert ran == expected, (tmp_path / "worker.log").read_text()
