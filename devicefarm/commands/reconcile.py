"""`devicefarm reconcile [--every S]`: re-send lost jobs, expire jobs of vanished devices.

A Redis broker is reached once at start (exit 1 when it does not answer). With `--every`,
a later pass that fails (the database or the broker unreachable) is logged and retried
with a growing pause (up to `MAX_BACKOFF_S`): the loop outlives outages.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from . import argtypes, common

#: The longest pause between failed passes.
MAX_BACKOFF_S = 30.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--every",
        type=argtypes.seconds,
        default=None,
        help="run a pass every S seconds until interrupted (default: once)",
    )
    common.add_db(p)
    common.add_broker(p)


#: ReconcileReport's fields that list devices or jobs, and how a summary line says them.
REPORT_LINES = (
    ("went_offline", "device(s) went offline"),
    ("stalled", "device(s) stalled (a message waits, nothing claimed)"),
    ("lease_expired", "job(s) whose lease expired"),
    ("moved_off_lost_device", "job(s) moved off a lost device"),
    ("resent_lost_message", "job(s) whose lost message was re-sent"),
    ("placed", "job(s) placed on a device"),
    ("expired", "job(s) expired"),
)


def summary(report: Any) -> str:
    """A reconcile pass as readable lines: what changed (with ids), messages sent and a
    broker error; `nothing to do` when the pass changed nothing."""
    lines = []
    for name, what in REPORT_LINES:
        items = getattr(report, name, None) or []
        if items:
            lines.append(f"{len(items)} {what}: {', '.join(str(i) for i in items)}")
    if report.sent:
        lines.append(f"{report.sent} message(s) sent")
    if report.broker_error:
        lines.append(f"broker error: {report.broker_error.splitlines()[0]}")
    deferred = getattr(report, "deferred", None) or {}
    if deferred:
        left = ", ".join(f"{n} {step}" for step, n in deferred.items())
        lines.append(f"left for the next pass (its budget spent): {left}")
    return "reconcile: " + ("; ".join(lines) if lines else "nothing to do")


def run(args: argparse.Namespace) -> int:
    from farm_core.dispatch import CeleryDispatcher
    from farm_core.reach import reach_broker
    from farm_core.settings import Timing
    from orchestrator.probes import probe_for
    from orchestrator.reconciler import reconcile

    url = common.broker_url(args)
    reach_broker(url)  # once, at start: later outages are retried (--every)
    engine = common.engine(args)  # a server database: `devicefarm db upgrade`'s
    dispatcher, probe, timing = CeleryDispatcher(url), probe_for(url), Timing.from_env()
    failures = 0
    if args.every:
        print(f"reconciling every {args.every:g} s", flush=True)
    while True:
        try:
            report = reconcile(engine, dispatcher, probe, timing)
        except Exception as exc:  # noqa: BLE001 - an outage must not end the loop
            if not args.every:
                raise
            failures += 1
            pause = min(args.every * 2 ** min(failures, 16), MAX_BACKOFF_S)
            print(
                f"reconcile pass failed ({type(exc).__name__}: {str(exc).splitlines()[0]}); "
                f"retrying in {pause:g} s",
                file=sys.stderr,
                flush=True,
            )
            time.sleep(pause)
            continue
        if failures:
            print(f"reconcile recovered after {failures} failed pass(es)", flush=True)
            failures = 0
        if report.changed() or report.deferred or not args.every:
            print(summary(report), flush=True)
        if not args.every:
            return 0
        if not report.moves_left():  # else the next pass at once
            time.sleep(args.every)
