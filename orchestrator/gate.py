"""The CI gate: a finished campaign's verdict as an exit code.

    0  every job succeeded and no measured figure regressed
    1  a job failed, timed out or was cancelled (or the wait gave up), or a suspect's
       confirmation could not decide (a confirmation job failed, or it did not finish)
    3  every job succeeded, but a latency regressed against its baseline

(2 stays argparse's: a usage error.) Failures win over regressions: a build with both
fails as failed. Each succeeded job is judged against its cell's history
(orchestrator.history); a suspect is a regression once paired runs confirm it
(orchestrator.confirm), or at once when the gate is told not to confirm.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Engine, select

from delegate_runtime.errors import JobError
from farm_core.dispatch import Dispatcher
from farm_core.schema import ACTIVE_STATES, SUCCEEDED, Campaign, Job, Result, StoredModel

from . import confirm as confirming
from . import history
from .confirm import Confirmation
from .history import HistoryVerdict, Past
from .regression import DEFAULT_THRESHOLD, SAMPLE_COLUMNS, sample_or_none

EXIT_OK, EXIT_FAILED, EXIT_REGRESSED = 0, 1, 3


@dataclass
class Cell:
    """One job of the campaign and how it fared. `verdict`: its run against its history
    (any verdict with `regressed` and `describe()`); `confirm`: a suspect needs a
    confirmation to be a regression; `confirmation`: the newest one, if any."""

    job: int
    model: str  #: lineage name
    device: str
    config: str
    state: str
    reason: str
    seconds: float | None
    verdict: Any = None
    baseline_campaign: int | None = None  #: the newest campaign of its baseline
    confirmation: Confirmation | None = None
    confirm: bool = False

    @property
    def failed(self) -> bool:
        return self.state != SUCCEEDED

    @property
    def suspect(self) -> bool:
        return self.verdict is not None and self.verdict.regressed

    @property
    def regressed(self) -> bool:
        if not self.suspect:
            return False
        return not self.confirm or (self.confirmation is not None and self.confirmation.regressed)

    @property
    def pending(self) -> bool:
        """A suspect still to be confirmed: no confirmation yet, or one running."""
        return (
            self.confirm
            and self.suspect
            and (self.confirmation is None or self.confirmation.state == confirming.RUNNING)
        )

    @property
    def undecided(self) -> bool:
        """A suspect whose confirmation is missing, running or failed."""
        return (
            self.confirm
            and self.suspect
            and (self.confirmation is None or self.confirmation.undecided)
        )

    def decision(self) -> str:
        """What the gate made of a suspect: `regressed, confirmed`, `suspect, cleared`, ..."""
        if not self.suspect:
            return "within noise" if self.verdict is not None else "not judged"
        if not self.confirm:
            return "regressed (not confirmed: confirmation is off)"
        if self.confirmation is None:
            return "suspect, awaiting confirmation"
        return {
            confirming.CONFIRMED: "regressed, confirmed",
            confirming.CLEARED: "suspect, cleared",
            confirming.RUNNING: "suspect, being confirmed",
            confirming.FAILED: "suspect, undecided",
        }[self.confirmation.state]

    def details(self) -> list[str]:
        """The history's verdict, then the confirmation's pairs, if any."""
        out = [] if self.verdict is None else [self.verdict.describe()]
        if self.confirmation is not None:
            out.append(self.confirmation.describe(getattr(self.verdict, "baseline_sha256", "")))
        return out

    def describe(self) -> str:
        """The decision and its details, on one line."""
        return "; ".join([self.decision(), *self.details()])


@dataclass
class GateReport:
    campaign_id: int
    name: str
    cells: list[Cell] = field(default_factory=list)
    baseline: str = ""  #: how baselines were chosen, in words

    @property
    def failed(self) -> list[Cell]:
        return [c for c in self.cells if c.failed]

    @property
    def regressions(self) -> list[Cell]:
        return [c for c in self.cells if c.regressed]

    @property
    def suspects(self) -> list[Cell]:
        return [c for c in self.cells if c.suspect]

    @property
    def undecided(self) -> list[Cell]:
        return [c for c in self.cells if c.undecided]

    @property
    def exit_code(self) -> int:
        if self.failed or self.undecided:
            return EXIT_FAILED
        return EXIT_REGRESSED if self.regressions else EXIT_OK


def resolve_campaign(conn: Connection, ref: str | int, exclude: int | None = None) -> int:
    """A campaign id from its id or its name (the newest of that name other than
    `exclude`); JobError when none matches."""
    text = str(ref).strip()
    if text.isdigit():
        found = conn.execute(select(Campaign.id).where(Campaign.id == int(text))).scalar()
    else:
        q = select(Campaign.id).where(Campaign.name == text)
        if exclude is not None:
            q = q.where(Campaign.id != exclude)
        found = conn.execute(q.order_by(Campaign.id.desc()).limit(1)).scalar()
    if found is None:
        raise JobError(f"no campaign {text!r} (`devicefarm status` lists them)")
    return int(found)


def evaluate(
    engine: Engine,
    campaign_id: int,
    baseline: str | int | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    confirm: bool = True,
) -> GateReport:
    """Each job's outcome, and each succeeded job's fastest run against its baseline: the
    good history of its cell (orchestrator.history), or the `baseline` campaign's result
    for the same cell; with `confirm`, a suspect's newest confirmation. JobError for an
    unknown campaign."""
    with engine.begin() as conn:
        name = conn.execute(select(Campaign.name).where(Campaign.id == campaign_id)).scalar()
        if name is None:
            raise JobError(f"no campaign {campaign_id} (`devicefarm status` lists them)")
        base_id = (
            resolve_campaign(conn, baseline, exclude=campaign_id) if baseline is not None else None
        )
        report = GateReport(
            campaign_id,
            name,
            baseline=f"campaign {base_id}"
            if base_id is not None
            else f"the median of the last {history.BASELINE_RUNS} good runs of each model name, "
            "device, configuration and configuration record",
        )
        rows = conn.execute(
            select(
                Job.id,
                Job.model_name,
                StoredModel.name.label("file_name"),
                Job.device_key,
                Job.config,
                Job.state,
                Job.reason,
                Job.started_at,
                Job.finished_at,
                Result.id.label("result_id"),
                Result.error,
                Result.device_key.label("ran_on"),
                Result.outcome,
                Result.config_fingerprint,
                *SAMPLE_COLUMNS,
            )
            .join(StoredModel, StoredModel.sha256 == Job.model_sha256)
            .outerjoin(Result, (Result.job_id == Job.id) & (Result.attempt == Job.attempt))
            .where(Job.campaign_id == campaign_id)
            .order_by(Job.model_name, Job.planned_device, Job.config, Job.id)
        ).mappings()
        for r in rows:
            took = (
                (r["finished_at"] - r["started_at"]).total_seconds()
                if r["started_at"] and r["finished_at"]
                else None
            )
            cell = Cell(
                r["id"],
                r["model_name"] or r["file_name"],
                r["ran_on"] or r["device_key"],
                r["config"],
                r["state"],
                (r["error"] or r["reason"] or "").strip(),
                took,
                confirm=confirm,
            )
            if r["state"] == SUCCEEDED and r["result_id"] is not None:
                _judge_cell(conn, cell, r, base_id, threshold)
            report.cells.append(cell)
    return report


def _judge_cell(
    conn: Connection,
    cell: Cell,
    row: Any,
    base_id: int | None,
    threshold: float,
) -> None:
    """Set the cell's verdict, its baseline's newest campaign and its confirmation."""
    value = history.figure(sample_or_none(row))
    if value is None:
        return
    fingerprint = row["config_fingerprint"] or ""
    if base_id is None:
        rows = history.cell_rows(
            conn, cell.model, cell.device, cell.config, fingerprint, row["result_id"]
        )
        confirmed = confirming.regressed_jobs(conn, [r["job"] for r in rows], threshold)
        past = history.good_history(rows, confirmed)
    else:
        past = _baseline_past(conn, base_id, cell, fingerprint)
    verdict: HistoryVerdict = history.judge(value, past, threshold)
    cell.verdict = verdict
    cell.baseline_campaign = max(verdict.baseline_campaigns, default=None)
    if cell.confirm and verdict.suspect:
        found = confirming.find(conn, cell.job)
        bar = confirming.bar(threshold, verdict.noise)
        checked = confirming.read(conn, found, bar) if found is not None else None
        if checked is not None and checked.baseline_sha256 == verdict.baseline_sha256:
            cell.confirmation = checked  # else it ran against another version: confirm again


def _baseline_past(conn: Connection, campaign_id: int, cell: Cell, fingerprint: str) -> list[Past]:
    """The named campaign's newest succeeded result for the same cell and configuration
    record, as a history of one."""
    row = (
        conn.execute(
            select(Result.id, Result.outcome, Result.model_sha256, *SAMPLE_COLUMNS)
            .join(Job, Job.id == Result.job_id)
            .where(
                Result.campaign_id == campaign_id,
                Job.model_name == cell.model,
                Result.device_key == cell.device,
                Result.config == cell.config,
                Result.config_fingerprint == fingerprint,
                Result.outcome == SUCCEEDED,
            )
            .order_by(Result.id.desc())
            .limit(1)
        )
        .mappings()
        .first()
    )
    value = history.figure(sample_or_none(row)) if row is not None else None
    return [] if value is None else [Past(value, row["model_sha256"], campaign_id)]


def confirm_pending(
    engine: Engine, dispatcher: Dispatcher, report: GateReport, pairs: int
) -> list[int]:
    """Start a confirmation for each suspect that has none; the confirmation campaigns to
    wait for (those started and those still running), in the report's order."""
    out = []
    for c in report.cells:
        if not c.pending:
            continue
        if c.confirmation is not None:
            out.append(c.confirmation.campaign)
            continue
        out.append(confirming.submit(engine, dispatcher, c.job, c.verdict.baseline_sha256, pairs))
    return out


def still_running(engine: Engine, campaign_id: int) -> int:
    """How many of the campaign's jobs have not ended."""
    with engine.begin() as conn:
        return len(
            conn.execute(
                select(Job.id).where(Job.campaign_id == campaign_id, Job.state.in_(ACTIVE_STATES))
            ).all()
        )


def summary_lines(report: GateReport) -> list[str]:
    """The verdict as text: failed jobs, a regressions section (every suspect, with its
    baseline, noise, change and confirmation), then one verdict line."""
    lines = []
    if report.failed:
        lines.append(f"failed jobs ({len(report.failed)}):")
        lines += [
            f"  {c.model} {c.device} {c.config}: {c.state}"
            + (f" ({c.reason.splitlines()[0][:160]})" if c.reason else "")
            for c in report.failed
        ]
    judged = [c for c in report.cells if c.verdict is not None and _judged(c.verdict)]
    lines.append(
        f"regressions ({len(report.regressions)} of {len(judged)} judged, "
        f"{len(report.suspects)} suspect, baseline: {report.baseline}):"
    )
    for c in report.suspects:
        lines.append(f"  {c.model} {c.device} {c.config}: {c.decision()}")
        lines += [f"    {d}" for d in c.details()]
    if not report.suspects:
        lines.append("  none")
    word = {EXIT_OK: "passed", EXIT_FAILED: "failed", EXIT_REGRESSED: "regressed"}
    undecided = f", {len(report.undecided)} undecided" if report.undecided else ""
    lines.append(
        f"campaign {report.campaign_id}: {word[report.exit_code]} "
        f"(exit {report.exit_code}): {len(report.cells)} jobs, {len(report.failed)} failed, "
        f"{len(report.regressions)} regressed{undecided}"
    )
    return lines


def _judged(verdict: Any) -> bool:
    return getattr(verdict, "judged", True)
