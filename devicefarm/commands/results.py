"""`devicefarm results CAMPAIGN --format table|csv|json` (exit 1 when a job failed)."""

from __future__ import annotations

import argparse

from . import argtypes, common


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "campaign", type=argtypes.campaign_id, help="the campaign's id (`devicefarm status`)"
    )
    p.add_argument(
        "--format",
        choices=("table", "csv", "json"),
        default="table",
        help="table (default: aligned text), csv or json (every row's figures)",
    )
    p.add_argument(
        "--full",
        action="store_true",
        help="json: include every figure, the device facts and versions (default: key figures)",
    )
    common.add_db(p)
    p.epilog = (
        "exit status: 1 when a job of the campaign failed, timed out or was cancelled (or on "
        "an error), else 0; the rows are printed either way"
    )


def run(args: argparse.Namespace) -> int:
    from delegate_runtime.errors import JobError
    from orchestrator.report import campaign_rows, format_csv, format_json, format_table

    rows = campaign_rows(common.engine(args), args.campaign, full=args.full)
    if not rows:
        raise JobError(f"campaign {args.campaign} has no jobs (or does not exist)")
    fmt = {"table": format_table, "csv": format_csv, "json": format_json}[args.format]
    print(fmt(rows))
    return 1 if common.failed_jobs(rows) else 0
