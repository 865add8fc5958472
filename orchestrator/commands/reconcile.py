"""`devicefarm reconcile [--every S]`: re-send lost jobs, expire jobs of vanished devices."""

from __future__ import annotations

import argparse
import time

from . import common


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--every",
        type=float,
        default=0.0,
        help="run a pass every S seconds until interrupted (default: once)",
    )
    common.add_db(p)
    common.add_broker(p)


def run(args: argparse.Namespace) -> int:
    from ..dispatch import CeleryDispatcher
    from ..probes import probe_for
    from ..reconciler import reconcile
    from ..settings import Timing

    engine = common.engine(args)
    url = common.broker_url(args)
    dispatcher, probe, timing = CeleryDispatcher(url), probe_for(url), Timing.from_env()
    while True:
        report = reconcile(engine, dispatcher, probe, timing)
        if report.changed() or not args.every:
            print(report)
        if not args.every:
            return 0
        time.sleep(args.every)
