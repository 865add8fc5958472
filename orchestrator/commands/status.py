"""`devicefarm status [CAMPAIGN]`: jobs by state per campaign, or one campaign's jobs."""

from __future__ import annotations

import argparse

from ..schema import ACTIVE_STATES, TERMINAL_STATES
from . import common


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("campaign", nargs="?", type=int, help="show this campaign's jobs")
    common.add_db(p)


def run(args: argparse.Namespace) -> int:
    from ..report import campaign_counts, campaign_rows, format_table

    engine = common.engine(args)
    if args.campaign is not None:
        rows = campaign_rows(engine, args.campaign)
        if not rows:
            print(f"campaign {args.campaign} has no jobs (or does not exist)")
            return 1
        print(format_table(rows))
        return 0
    order = (*ACTIVE_STATES, *TERMINAL_STATES)
    for c in campaign_counts(engine):
        states = ", ".join(f"{s} {c['states'][s]}" for s in order if s in c["states"])
        flag = " (cancelled)" if c["cancelled"] else ""
        print(
            f"campaign {c['campaign']}{flag} {c['created']:%Y-%m-%d %H:%M} "
            f"{c['name'][:40]}: {c['jobs']} jobs: {states}"
        )
    return 0
