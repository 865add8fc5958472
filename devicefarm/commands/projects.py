"""`devicefarm projects add|set|list`: a lab admin's projects and their quotas.

    devicefarm projects add vision --max-concurrent-jobs 4 --device-minutes-per-day 600
    devicefarm projects set vision --device-minutes-per-day none
    devicefarm projects list

A quota left out (or `none`) is no limit; a project with no row has none. Dispatch keeps a
project's jobs queued while it is at a quota, and submission refuses a campaign of a
project that used up today's device-minutes (farm_core.quotas).
"""

from __future__ import annotations

import argparse
from typing import Any

from . import argtypes, common

NO_LIMIT = ("none", "unlimited")


def _limit(parse: Any) -> Any:
    """`parse`, or None for `none`/`unlimited` (no limit)."""

    def limit(text: str) -> Any:
        return None if text.strip().lower() in NO_LIMIT else parse(text)

    limit.__name__ = parse.__name__
    return limit


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    add = sub.add_parser("add", help="create a project with its quotas")
    change = sub.add_parser("set", help="change a project's quotas")
    listing = sub.add_parser("list", help="projects: jobs out and device-minutes vs quotas")
    for q, keep in ((add, None), (change, argparse.SUPPRESS)):
        q.add_argument("name", help="the project's name")
        q.add_argument(
            "--max-concurrent-jobs",
            type=_limit(argtypes.int_in(0)),
            default=keep,
            metavar="N",
            help="its jobs dispatched or running at once (`none`: no limit)",
        )
        q.add_argument(
            "--device-minutes-per-day",
            type=_limit(argtypes.non_negative),
            default=keep,
            metavar="M",
            help="device-minutes its jobs may use per UTC day (`none`: no limit)",
        )
        common.add_db(q)
    common.add_db(listing)


def _quota(value: float | int | None) -> str:
    return "-" if value is None else f"{value:g}"


def run(args: argparse.Namespace) -> int:
    from farm_core import quotas

    with common.engine(args).begin() as conn:
        if args.action == "add":
            q = quotas.add(conn, args.name, args.max_concurrent_jobs, args.device_minutes_per_day)
            print(f"project {q.project}: {_limits(q)}")
        elif args.action == "set":
            given = {
                k: getattr(args, k)
                for k in ("max_concurrent_jobs", "device_minutes_per_day")
                if hasattr(args, k)
            }
            q = quotas.change(conn, args.name, **given)
            print(f"project {q.project}: {_limits(q)}")
        else:
            _print_usage(quotas.usage(conn))
    return 0


def _limits(q: Any) -> str:
    jobs = _quota(q.max_concurrent_jobs)
    minutes = _quota(q.device_minutes_per_day)
    return f"at most {jobs} concurrent jobs, {minutes} device-minutes per day ('-': no limit)"


def _print_usage(rows: list[Any]) -> None:
    if not rows:
        print("no projects (`devicefarm projects add NAME ...` creates one)")
        return
    table = [("project", "jobs out", "max jobs", "minutes today", "minutes/day", "queued")]
    for u in rows:
        q = u.quota
        table.append(
            (
                q.project,
                str(u.concurrent),
                _quota(q.max_concurrent_jobs),
                f"{u.minutes_today:.1f}",
                _quota(q.device_minutes_per_day),
                str(u.queued),
            )
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
