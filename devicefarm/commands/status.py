"""`devicefarm status [CAMPAIGN]`: jobs by state per campaign (and the verdict `submit
--wait` kept), or one campaign's jobs (exit 1 when one of them failed, timed out or was
cancelled)."""

from __future__ import annotations

import argparse
from datetime import datetime

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
    for c in campaign_counts(engine):
        print(overview_line(c, c["created"]))
    return 0


def overview_line(c: dict, created: datetime) -> str:
    """`campaign 12 2026-12-02 10:00 net: 3 jobs: succeeded 3; gate: regressed (exit 3)`
    (orchestrator.report.campaign_counts' item; here and through the API's client)."""
    from orchestrator.verdicts import summary

    order = (*ACTIVE_STATES, *TERMINAL_STATES)
    states = ", ".join(f"{s} {c['states'][s]}" for s in order if s in c["states"])
    flag = " (cancelled)" if c["cancelled"] else ""
    gate = summary(c.get("gate"))
    return (
        f"campaign {c['campaign']}{flag} {created:%Y-%m-%d %H:%M} "
        f"{c['name'][:40]}: {c['jobs']} jobs: {states}" + (f"; {gate}" if gate else "")
    )
