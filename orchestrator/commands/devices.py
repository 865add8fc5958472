"""`devicefarm devices`: registered devices, their facts, liveness and health."""

from __future__ import annotations

import argparse
from datetime import timedelta

from . import common


def add_arguments(p: argparse.ArgumentParser) -> None:
    common.add_db(p)


def run(args: argparse.Namespace) -> int:
    from ..report import device_rows
    from ..schema import utcnow
    from ..settings import Timing

    cutoff = utcnow() - timedelta(seconds=Timing.from_env().offline_after_s)
    rows = device_rows(common.engine(args))
    if not rows:
        print("no devices registered (start `devicefarm worker`)")
        return 0
    for r in rows:
        alive = "online" if r["last_seen"] >= cutoff else "offline"
        why = f" ({r['health_reason']})" if r["health_reason"] else ""
        tags = f" tags={','.join(r['tags'])}" if r["tags"] else ""
        print(
            f"{r['key']}  {alive}  {r['health']}{why}  host={r['host']} "
            f"model={r['model']!r} driver={r['driver_version']!r} "
            f"seen={r['last_seen']:%H:%M:%S}{tags}"
        )
    return 0
