"""The reconciler as `devicefarm reconcile --every S` runs it, each pass timed.

    python -m labkit.timed_reconciler --db URL --broker URL --every 1 --out passes.jsonl

The same pass (orchestrator.reconciler.reconcile, the probe and dispatcher the command
uses) in the same loop: a failed pass (broker or database away) is retried after a pause.
Each pass appends one JSON line to `--out`: its start (Unix time), seconds, how many jobs or
devices each reason counted, messages sent, and the error of a failed pass. A pass that
called messages lost also says how many of them Redis held right after (`lost_found`:
every list of the queues' prefix and the unacked hash searched, before the pass's sends
are consumed), with a few (`lost_where`: job, attempt, where).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict

#: The pause after a failed pass (the command's grows; a bench wants the pass back soon).
RETRY_S = 1.0


def main(argv: list[str] | None = None) -> int:
    from farm_core.database import open_farm
    from farm_core.dispatch import CeleryDispatcher
    from farm_core.settings import Timing
    from orchestrator.probes import probe_for
    from orchestrator.reconciler import reconcile

    p = argparse.ArgumentParser(prog="python -m labkit.timed_reconciler")
    p.add_argument("--db", required=True)
    p.add_argument("--broker", required=True)
    p.add_argument("--every", type=float, default=1.0)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    engine = open_farm(args.db)  # as the command opens it
    dispatcher, probe = CeleryDispatcher(args.broker), probe_for(args.broker)
    timing = Timing.from_env()
    with open(args.out, "a", buffering=1) as out:
        while True:
            started, t0 = time.time(), time.perf_counter()
            line: dict = {"at": started}
            try:
                report = reconcile(engine, dispatcher, probe, timing)
            except Exception as exc:  # noqa: BLE001 - an outage must not end the loop
                line |= {"s": time.perf_counter() - t0, "error": f"{type(exc).__name__}: {exc}"}
                out.write(json.dumps(line) + "\n")
                time.sleep(RETRY_S)
                continue
            line["s"] = time.perf_counter() - t0
            if report.resent_lost_message:
                line |= where_lost(engine, probe, report.resent_lost_message)
            for name, value in asdict(report).items():
                line[name] = len(value) if isinstance(value, list) else value
            out.write(json.dumps(line) + "\n")
            if not report.moves_left():  # else the next pass at once, as the command's
                time.sleep(args.every)


def where_lost(engine, probe, job_ids: list[int]) -> dict:  # type: ignore[no-untyped-def]
    """Where Redis holds the messages of the attempts just called lost (each job's attempt
    before the one it is at now)."""
    from sqlalchemy import select

    from farm_core.celery_app import QUEUE_PREFIX, task_id
    from farm_core.schema import Job
    from orchestrator.probes import REDIS_UNACKED_KEY, task_ids

    with engine.begin() as conn:
        rows = conn.execute(select(Job.id, Job.attempt).where(Job.id.in_(job_ids))).all()
    wanted = {task_id(j, a - 1): (j, a - 1) for j, a in rows}
    client = probe.client
    found = []
    for key in client.scan_iter(match=QUEUE_PREFIX + "*", count=1000):
        if client.type(key) == b"list":
            where = key.decode(errors="replace")
            found += [
                [*wanted[t], where] for t in task_ids(client.lrange(key, 0, -1)) & wanted.keys()
            ]
    unacked = task_ids(client.hvals(REDIS_UNACKED_KEY))
    found += [[*wanted[t], "unacked"] for t in unacked & wanted.keys()]
    return {"lost_found": len(found), "lost_where": found[:5]}


if __name__ == "__main__":
    sys.exit(main())
