"""Options and helpers shared by the orchestrator's subcommands."""

from __future__ import annotations

import argparse
import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from sqlalchemy import Engine

from delegate_runtime.commands._flags import output_file
from farm_core import service_urls
from farm_core.settings import ENV_BROKER, ENV_DB, default_db_url

from . import argtypes

if TYPE_CHECKING:
    from orchestrator.gate import GateReport


def add_db(p: argparse.ArgumentParser, existing: bool = True) -> None:
    """--db, checked as it is parsed; `existing`: the farm must be there already (every
    command but those that start one: a SQLite file is never created by a typo)."""
    p.add_argument(
        "--db",
        default=None,
        type=service_urls.farm_database_url if existing else service_urls.database_url,
        help=f"database URL (default: ${ENV_DB} or the embedded SQLite file)",
    )


def add_broker(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--broker",
        default=None,
        type=service_urls.broker_url,
        help=f"broker URL (default: ${ENV_BROKER} or the embedded filesystem broker)",
    )


def db_url(args: argparse.Namespace) -> str:
    return args.db or default_db_url()


def broker_url(args: argparse.Namespace) -> str:
    """--broker (checked as it was parsed), else $DEVICEFARM_BROKER (checked here: a
    UsageError) or the embedded filesystem broker, once the farm is known to exist (its
    folder is never made for a farm that is not there)."""
    if not args.db:
        service_urls.default_db()
    return args.broker or service_urls.default_broker()


def engine(args: argparse.Namespace) -> Engine:
    """The farm database, which must exist (--db was checked as it was parsed; the
    default is checked here), opened by farm_core.database.open_farm: SQLite migrated,
    servers checked."""
    from farm_core.database import open_farm

    return open_farm(args.db or service_urls.default_db())


#: The gate's exit codes, for --help (orchestrator.gate defines them).
EXIT_CODES = """exit status:
  0  every job succeeded and no latency regressed
  1  a job failed, timed out or was cancelled (or an error, or --wait-timeout passed), or
     a suspect's confirmation could not decide
  2  a usage error
  3  every job succeeded, but a latency regressed against its baseline (confirmed by
     paired runs unless --confirm-pairs 0)"""


def failed_jobs(rows: list[dict]) -> int:
    """How many of a campaign's rows (orchestrator.report.campaign_rows) ended unsucceeded."""
    from farm_core.schema import SUCCEEDED, TERMINAL_STATES

    return sum(1 for r in rows if r["state"] in TERMINAL_STATES and r["state"] != SUCCEEDED)


def add_gate(p: argparse.ArgumentParser) -> None:
    """Options of the CI gate: the regression baseline, the threshold, the confirmation, a
    JUnit file."""
    from orchestrator.confirm import DEFAULT_PAIRS
    from orchestrator.history import BASELINE_RUNS, K_NOISE
    from orchestrator.regression import DEFAULT_THRESHOLD

    p.add_argument(
        "--baseline",
        default=None,
        metavar="CAMPAIGN",
        help="judge latencies against this campaign (an id or a name) instead of the median "
        f"of the last {BASELINE_RUNS} good runs of each model name, device and configuration",
    )
    p.add_argument(
        "--regression-threshold",
        type=_percent,
        default=DEFAULT_THRESHOLD * 100,
        metavar="PERCENT",
        help="a job is suspect when its fastest run is slower than its baseline by more than "
        f"this and by more than {K_NOISE:g}x the run-to-run noise (default "
        f"{DEFAULT_THRESHOLD * 100:g}%%); a confirmed suspect is a regression",
    )
    p.add_argument(
        "--confirm-pairs",
        type=argtypes.int_in(0, MAX_PAIRS),
        default=None,
        metavar="N",
        help="confirm each suspect with N pairs of runs of the baseline's version and this "
        "one, taking turns first, on the suspect's device: a regression only when slower in every "
        f"pair and beyond the threshold (default {DEFAULT_PAIRS}; 0: no confirmation, a "
        "suspect fails the build as regressed)",
    )
    p.add_argument(
        "--junit",
        default=None,
        type=output_file,
        metavar="PATH",
        help="write a JUnit XML report: one testcase per job, failures for failed jobs and "
        "regressions",
    )


def _percent(text: str) -> float:
    from .argtypes import float_over

    return float_over(0.0, inclusive=True)(text.rstrip("%"))


#: The most pairs --confirm-pairs takes (each pair is two jobs on one device).
MAX_PAIRS = 20


def confirm_pairs(args: argparse.Namespace) -> int:
    """--confirm-pairs, or its default."""
    from orchestrator.confirm import DEFAULT_PAIRS

    return DEFAULT_PAIRS if args.confirm_pairs is None else args.confirm_pairs


def wait_and_gate(args: argparse.Namespace, engine: Engine, campaign_id: int) -> int:
    """`--wait`: show each job until all have ended, then the gate's verdict (`gate`); exit
    1 when the wait gives up. The JUnit file (--junit) is written on every way out: with
    the verdict, when a wait passes --wait-timeout, and when interrupted (Ctrl-C, or the
    SIGTERM a CI system stops a job with), the jobs not ended then as errors."""
    try:
        with sigterm_interrupts():
            if not wait_showing_jobs(engine, campaign_id, args.wait_timeout):
                return _gave_up(args, engine, campaign_id)
            return gate(args, engine, campaign_id)
    except KeyboardInterrupt:
        _junit_as_it_stands(args, engine, campaign_id, "interrupted")
        raise


def gate(args: argparse.Namespace, engine: Engine, campaign_id: int) -> int:
    """Judge a finished campaign: confirm its suspects (unless --confirm-pairs 0), print
    failures and a regressions section, keep the verdict with the campaign (for `status`
    and `results`), write the JUnit file when asked; the exit code (orchestrator.gate)."""
    from orchestrator import verdicts
    from orchestrator.gate import summary_lines

    report = _evaluate(args, engine, campaign_id)
    if any(c.pending for c in report.cells):
        if not _confirm(args, engine, report):
            return _gave_up(args, engine, campaign_id)
        report = _evaluate(args, engine, campaign_id)
    print("\n".join(summary_lines(report)), flush=True)
    _write_junit(args, report)
    verdicts.record(engine, report)
    return report.exit_code


def _evaluate(args: argparse.Namespace, engine: Engine, campaign_id: int) -> GateReport:
    from orchestrator.gate import evaluate

    return evaluate(
        engine,
        campaign_id,
        args.baseline,
        threshold=args.regression_threshold / 100.0,
        confirm=confirm_pairs(args) > 0,
    )


def _write_junit(args: argparse.Namespace, report: GateReport, ended: str = "") -> None:
    from orchestrator import junit

    if args.junit:
        print(f"JUnit report: {junit.write(report, args.junit, ended)}", flush=True)


def _gave_up(args: argparse.Namespace, engine: Engine, campaign_id: int) -> int:
    """A wait passed --wait-timeout: the JUnit file as the campaign stands; exit 1."""
    from orchestrator.gate import EXIT_FAILED

    _junit_as_it_stands(args, engine, campaign_id, f"--wait-timeout {args.wait_timeout:g} s passed")
    return EXIT_FAILED


def _junit_as_it_stands(
    args: argparse.Namespace, engine: Engine, campaign_id: int, ended: str
) -> None:
    """The JUnit file of a wait that ended early: jobs not ended are errors, suspects not
    yet confirmed unconfirmed. A failure here is said, never raised over the wait's own
    outcome."""
    if not args.junit:
        return
    try:
        _write_junit(args, _evaluate(args, engine, campaign_id), ended)
    except Exception as exc:  # noqa: BLE001 - the wait's outcome (exit 1, 130) stands
        print(f"JUnit report not written: {type(exc).__name__}: {exc}", flush=True)


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt in the block (main thread only), as Ctrl-C does."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(_sig: int, _frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _confirm(args: argparse.Namespace, engine: Engine, report) -> bool:
    """Start the report's confirmations and wait for them, showing each job as it ends;
    False when a wait gave up."""
    from farm_core.dispatch import CeleryDispatcher
    from orchestrator.gate import confirm_pending

    for c in report.cells:
        if c.pending:
            print(f"suspect: {c.model} {c.device} {c.config}: {c.verdict.describe()}", flush=True)
    dispatcher = CeleryDispatcher(broker_url(args))
    try:
        campaigns = confirm_pending(engine, dispatcher, report, confirm_pairs(args))
    finally:
        dispatcher.close()
    for cid in campaigns:
        print(f"confirmation campaign {cid}: baseline and candidate alternating", flush=True)
        if not wait_showing_jobs(engine, cid, args.wait_timeout):
            return False
    return True


def wait_showing_jobs(engine: Engine, campaign_id: int, timeout_s: float | None) -> bool:
    """Show each job of a campaign as it ends, and running jobs' progress (as the embedded
    `run` does: the workers store it with the jobs), until all have ended; False, said,
    when `timeout_s` passes first (the jobs go on). The lab's reconciler (`devicefarm
    reconcile --every`) re-sends lost jobs meanwhile."""
    from .. import embedded

    try:
        embedded.wait_for_campaign(
            engine,
            campaign_id,
            lambda m: print(m, flush=True),
            reconcile_pass=lambda: None,
            timeout_s=timeout_s,
        )
    except TimeoutError as exc:
        print(f"{exc}; its jobs go on (`devicefarm status {campaign_id}`)", flush=True)
        return False
    return True
