"""Options and helpers shared by the orchestrator's subcommands."""

from __future__ import annotations

import argparse

from sqlalchemy import Engine

from farm_core.settings import ENV_BROKER, ENV_DB, default_broker_url, default_db_url


def add_db(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db", default=None, help=f"database URL (default: ${ENV_DB} or the embedded SQLite file)"
    )


def add_broker(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--broker",
        default=None,
        help=f"broker URL (default: ${ENV_BROKER} or the embedded filesystem broker)",
    )


def db_url(args: argparse.Namespace) -> str:
    return args.db or default_db_url()


def broker_url(args: argparse.Namespace) -> str:
    """The broker URL asked for, its transport checked (an unknown scheme is one line)."""
    return checked_broker_url(args.broker or default_broker_url())


def checked_broker_url(url: str) -> str:
    """`url`, if kombu has a transport for its scheme (redis://, filesystem://, ...)."""
    from kombu.transport import get_transport_cls

    from delegate_runtime.errors import JobError

    scheme, sep, _ = url.partition("://")
    if not sep or not scheme:
        raise JobError(f"bad broker URL {url!r}: expected SCHEME://... (redis://host:6379/0)")
    try:
        get_transport_cls(scheme.split("+", 1)[0])
    except (KeyError, ImportError) as exc:
        raise JobError(f"bad broker URL {url!r}: no transport for {scheme!r}") from exc
    return url


def engine(args: argparse.Namespace) -> Engine:
    """The farm database (farm_core.database.open_farm: SQLite migrated, servers checked)."""
    from farm_core.database import open_farm

    return open_farm(db_url(args))


#: The gate's exit codes, for --help (orchestrator.gate defines them).
EXIT_CODES = """exit status:
  0  every job succeeded and no latency regressed
  1  a job failed, timed out or was cancelled (or an error, or --wait-timeout passed)
  2  a usage error
  3  every job succeeded, but a latency regressed against its baseline"""


def failed_jobs(rows: list[dict]) -> int:
    """How many of a campaign's rows (orchestrator.report.campaign_rows) ended unsucceeded."""
    from farm_core.schema import SUCCEEDED, TERMINAL_STATES

    return sum(1 for r in rows if r["state"] in TERMINAL_STATES and r["state"] != SUCCEEDED)


def add_gate(p: argparse.ArgumentParser) -> None:
    """Options of the CI gate: the regression baseline, the threshold, a JUnit file."""
    from orchestrator.regression import DEFAULT_THRESHOLD

    p.add_argument(
        "--baseline",
        default=None,
        metavar="CAMPAIGN",
        help="judge latencies against this campaign (an id or a name) instead of the last "
        "good run of each model name, device and configuration",
    )
    p.add_argument(
        "--regression-threshold",
        type=_percent,
        default=DEFAULT_THRESHOLD * 100,
        metavar="PERCENT",
        help=f"a median slowdown beyond this (and significant at p<0.01, one-sided "
        f"Mann-Whitney U on the raw runs) is a regression (default {DEFAULT_THRESHOLD * 100:g}%%)",
    )
    p.add_argument(
        "--junit",
        default=None,
        metavar="PATH",
        help="write a JUnit XML report: one testcase per job, failures for failed jobs and "
        "regressions",
    )


def _percent(text: str) -> float:
    from .argtypes import float_over

    return float_over(0.0, inclusive=True)(text.rstrip("%"))


def gate(args: argparse.Namespace, engine: Engine, campaign_id: int) -> int:
    """Judge a finished campaign: print failures and a regressions section, write the JUnit
    file when asked; the exit code (orchestrator.gate)."""
    from orchestrator import gate, junit

    report = gate.evaluate(
        engine, campaign_id, args.baseline, threshold=args.regression_threshold / 100.0
    )
    print("\n".join(gate.summary_lines(report)), flush=True)
    if args.junit:
        print(f"JUnit report: {junit.write(report, args.junit)}", flush=True)
    return report.exit_code
