"""`devicefarm reservations list [--all]` and `reservations cancel ID`: the devices held
(`devicefarm reserve` makes a reservation)."""

from __future__ import annotations

import argparse

from . import argtypes, common


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = sub.add_parser("list", help="reservations on now or to come")
    listing.add_argument("--all", action="store_true", help="also those ended or cancelled")
    common.add_db(listing)
    cancel = sub.add_parser("cancel", help="end a reservation now")
    cancel.add_argument("id", type=argtypes.int_in(1), help="its id (`reservations list`)")
    common.add_db(cancel)


def run(args: argparse.Namespace) -> int:
    from farm_core import reservations
    from farm_core.schema import utcnow

    now = utcnow()
    with common.engine(args).begin() as conn:
        if args.action == "cancel":
            held = reservations.cancel(conn, args.id, now)
            print(f"reservation {held.id} on {held.device_key} cancelled")
            return 0
        rows = reservations.listing(conn, now, ended=args.all)
    if not rows:
        print("no reservations")
        return 0
    table = [("id", "device", "held by", "from", "until", "state", "reason")]
    for r in rows:
        table.append(
            (
                str(r.id),
                r.device_key,
                r.holder(),
                reservations.when(r.starts_at),
                reservations.when(r.ends_at),
                _state(r, now),
                r.reason.splitlines()[0] if r.reason else "",
            )
        )
    widths = [max(len(t[i]) for t in table) for i in range(len(table[0]))]
    for t in table:
        print("  ".join(c.ljust(w) for c, w in zip(t, widths, strict=True)).rstrip())
    return 0


def _state(r, now) -> str:
    if r.cancelled_at is not None:
        return "cancelled"
    if r.ends_at <= now:
        return "ended"
    return "on" if r.starts_at <= now else "to come"
