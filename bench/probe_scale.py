"""The reconciler's broker probe with a fleet's queues: how long one full probe takes.

    python bench/probe_scale.py [--queues 1000] [--messages 5000] [--unacked 1000] [--repeat 5]
        [--redis redis://127.0.0.1:6379/14]

A scratch Redis database (emptied before and after) gets `--queues` device queues with
`--messages` job messages spread over them and their priority lists, and `--unacked`
delivered ones in kombu's unacked hash, each a real Celery envelope as the farm sends it.
Then `orchestrator.probes.RedisProbe()` (every device queue's lists and the hash) is timed
`--repeat` times. The anchor, in the same run: one pipelined read of the same lists and
hash, their names known (no scan), with the same decoding: the least a probe can do.
After a Redis restart in `bench_fleet.py` a pass's probe took 13.7 s over 1,000 queues.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from farm_core.celery_app import queue_for, task_id  # noqa: E402
from orchestrator.probes import (  # noqa: E402
    REDIS_UNACKED_KEY,
    RedisProbe,
    priority_lists,
    task_ids,
)


def envelope(job: int) -> str:
    """A job message as kombu stores it (the farm's headers and a body of its size)."""
    import json

    headers = {"id": task_id(job, 1), "task": "devicefarm.run_job", "retries": 0}
    return json.dumps({"body": "x" * 600, "headers": headers, "properties": {"priority": 0}})


def fill(client, queues: int, messages: int, unacked: int) -> list[str]:
    """The scratch database filled; the names of the lists that hold messages."""
    rng = random.Random(0)
    names = [priority_lists(queue_for(f"noop:d{q:04d}")) for q in range(queues)]
    used: set[str] = set()
    with client.pipeline(transaction=False) as pipe:
        for job in range(messages):
            name = rng.choice(names)[rng.choice((0, 0, 0, 3, 6, 9))]
            pipe.lpush(name, envelope(job))
            used.add(name)
        for job in range(messages, messages + unacked):
            queue = rng.choice(names)[0]
            pipe.hset(REDIS_UNACKED_KEY, f"tag-{job}", f'[{envelope(job)}, "", "{queue}"]')
        pipe.execute()
    return sorted(used)


def anchor(client, lists: list[str]) -> set[str]:
    with client.pipeline(transaction=False) as pipe:
        for name in lists:
            pipe.lrange(name, 0, -1)
        pipe.hvals(REDIS_UNACKED_KEY)
        *got, hashed = pipe.execute()
    return task_ids([m for one in got for m in one] + list(hashed))


def timed(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queues", type=int, default=1000)
    ap.add_argument("--messages", type=int, default=5000)
    ap.add_argument("--unacked", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/14")
    a = ap.parse_args()
    probe = RedisProbe(a.redis)
    client = probe.client
    client.flushdb()
    try:
        lists = fill(client, a.queues, a.messages, a.unacked)
        base, want = timed(lambda: anchor(client, lists), a.repeat)
        took, seen = timed(probe, a.repeat)
        assert seen == want and len(want) == a.messages + a.unacked, "the probe missed messages"
        print(
            f"{a.queues} queues, {a.messages} messages in {len(lists)} lists, {a.unacked} "
            f"unacked: full probe {took * 1e3:.1f} ms (median of {a.repeat}), anchor (one "
            f"pipelined read, names known) {base * 1e3:.1f} ms: {took / base:.2f}x"
        )
    finally:
        client.flushdb()
    return 0


if __name__ == "__main__":
    sys.exit(main())
