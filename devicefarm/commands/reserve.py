"""`devicefarm reserve DEVICE --for 2h --reason TEXT`: hold a device for a time window.

While the reservation is on, the device starts only the holder's jobs: those of `--project`
(none given: the user's alone); the jobs of others wait, saying until when, or go to
another device of the same hardware. Times are UTC (`2025-06-01 14:00`, or ISO 8601 with
an offset); `reservations list` and `reservations cancel ID` show and end them.
"""

from __future__ import annotations

import argparse
import getpass
import re
from datetime import datetime, timedelta, timezone

from . import common

_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)([dhms]))", re.IGNORECASE)
_UNIT_S = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def duration(text: str) -> timedelta:
    """`2h`, `90m`, `1h30m`, `1d`: a positive duration."""
    compact = text.strip().replace(" ", "")
    parts = _DURATION.findall(compact)
    if not parts or "".join(n + u for n, u in parts) != compact:
        raise argparse.ArgumentTypeError(f"not a duration like 2h, 90m or 1h30m: {text!r}")
    total = timedelta(seconds=sum(float(n) * _UNIT_S[u.lower()] for n, u in parts))
    if total <= timedelta(0):
        raise argparse.ArgumentTypeError(f"must be longer than zero: {text!r}")
    return total


def moment(text: str) -> datetime:
    """`now`, `2025-06-01 14:00` (UTC) or ISO 8601 with an offset: naive UTC."""
    if text.strip().lower() == "now":
        return datetime.now(timezone.utc).replace(tzinfo=None, microsecond=0)
    try:
        t = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a time like '2025-06-01 14:00' (UTC) or ISO 8601: {text!r}"
        ) from None
    if t.tzinfo is not None:
        t = t.astimezone(timezone.utc).replace(tzinfo=None)
    return t


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("device", help="the device's key (`devicefarm devices`)")
    p.add_argument("--from", dest="start", type=moment, default=None, help="start (default: now)")
    end = p.add_mutually_exclusive_group(required=True)
    end.add_argument("--until", type=moment, help="end (UTC, or ISO 8601 with an offset)")
    end.add_argument("--for", dest="length", type=duration, help="length: 2h, 90m, 1h30m, 1d")
    p.add_argument("--reason", default="", help="why (shown to those whose jobs wait)")
    p.add_argument(
        "--project",
        default="",
        help="the project whose jobs may run on it meanwhile (default: only your own jobs)",
    )
    p.add_argument("--user", default=None, help="who holds it (default: your login name)")
    common.add_db(p)


def run(args: argparse.Namespace) -> int:
    from farm_core import reservations
    from farm_core.schema import utcnow

    now = utcnow()
    start = args.start or now
    end = args.until or start + args.length
    user = args.user if args.user is not None else getpass.getuser()
    with common.engine(args).begin() as conn:
        held = reservations.reserve(
            conn, args.device, user, args.project, start, end, args.reason, now
        )
    print(
        f"reservation {held.id}: {held.device_key} held by {held.holder()} from "
        f"{reservations.when(held.starts_at)} until {reservations.when(held.ends_at)}"
    )
    return 0
