"""`devicefarm results CAMPAIGN --format table|csv|json [--show-config]` (exit 1 when a job
failed)."""

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
    p.add_argument(
        "--show-config",
        action="store_true",
        help="table: after the rows, each configuration the results were measured under "
        "(every switch with its value and source: default, env, option...), with its jobs; "
        "json carries it as `measurement`",
    )
    p.add_argument(
        "--delegates",
        action="store_true",
        help="which delegate per device and model: each configuration's latency, init, "
        "error against the CPU, nodes delegated and fallbacks, the recommended one (*), and "
        "the configurations submission refused on each device with the reason (docs/delegates.md)",
    )
    common.add_db(p)
    p.epilog = (
        "exit status: 1 when a job of the campaign failed, timed out or was cancelled (or on "
        "an error), else 0; the rows are printed either way"
    )


def run(args: argparse.Namespace) -> int:
    from delegate_runtime.errors import JobError
    from orchestrator.report import campaign_rows

    rows = campaign_rows(common.engine(args), args.campaign, full=args.full)
    if not rows:
        raise JobError(f"campaign {args.campaign} has no jobs (or does not exist)")
    if args.delegates:
        print(delegate_report(common.engine(args), args.campaign, rows))
    else:
        show(rows, args)
    return 1 if common.failed_jobs(rows) else 0


def delegate_report(engine, campaign: int, rows: list[dict]) -> str:
    """The per-device delegate comparison, with the refusals submission kept."""
    from orchestrator.delegate_choice import choose, format_choice
    from orchestrator.refusals import stored

    with engine.begin() as conn:
        refused = stored(conn, campaign)
    return format_choice(choose(rows), refused)


def show(rows: list[dict], args: argparse.Namespace) -> None:
    """Print the rows in `--format`; with --show-config, a table is followed by the
    configuration records (here and through the API's client)."""
    from orchestrator.report import format_configs, format_csv, format_json, format_table

    fmt = {"table": format_table, "csv": format_csv, "json": format_json}[args.format]
    print(fmt(rows))
    if args.show_config and args.format == "table":
        print()
        print(format_configs(rows) or "(no results yet)")
