"""`devicefarm results CAMPAIGN --format table|csv|json`."""

from __future__ import annotations

import argparse

from . import common


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("campaign", type=int)
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    p.add_argument(
        "--full",
        action="store_true",
        help="json: include every figure, the device facts and versions",
    )
    common.add_db(p)


def run(args: argparse.Namespace) -> int:
    from ..report import campaign_rows, format_csv, format_json, format_table

    rows = campaign_rows(common.engine(args), args.campaign, full=args.full)
    if not rows:
        print(f"campaign {args.campaign} has no jobs (or does not exist)")
        return 1
    fmt = {"table": format_table, "csv": format_csv, "json": format_json}[args.format]
    print(fmt(rows))
    return 0
