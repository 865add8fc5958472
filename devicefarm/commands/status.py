"""`devicefarm status [CAMPAIGN]`: jobs by state per campaign, or one campaign's jobs (exit 1
when one of them failed, timed out or was cancelled)."""

from __future__ import annotations

import argparse

from farm_core.schema import ACTIVE_STATES, TERMINAL_STATES

from . import argtypes, common


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "campaign",
        nargs="?",
        type=argtypes.campaign_id,
        help="show this campaign's jobs (default: every campaign's counts)",
    )
    common.add_db(p)
    p.epilog = (
        "exit status: 1 when a job of CAMPAIGN failed, timed out or was cancelled (or on an "
        "error), else 0"
    )


def run(args: argparse.Namespace) -> int:
    from delegate_runtime.errors import JobError
    from orchestrator.report import campaign_counts, campaign_rows, format_table

    engine = common.engine(args)
    if args.campaign is not None:
        rows = campaign_rows(engine, args.campaign)
        if not rows:
            raise JobError(f"campaign {args.campaign} has no jobs (or does not exist)")
        print(format_table(rows))
        return 1 if common.failed_jobs(rows) else 0
    order = (*ACTIVE_STATES, *TERMINAL_STATES)
    for c in campaign_counts(engine):
        states = ", ".join(f"{s} {c['states'][s]}" for s in order if s in c["states"])
        flag = " (cancelled)" if c["cancelled"] else ""
        print(
            f"campaign {c['campaign']}{flag} {c['created']:%Y-%m-%d %H:%M} "
            f"{c['name'][:40]}: {c['jobs']} jobs: {states}"
        )
    return 0
