"""The CI gate: a finished campaign's verdict as an exit code.

    0  every job succeeded and no measured figure regressed
    1  a job failed, timed out or was cancelled (or the wait gave up)
    3  every job succeeded, but a latency regressed against its baseline

(2 stays argparse's: a usage error.) Failures win over regressions: a build with both
fails as failed. Regressions are judged by orchestrator.regression.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Engine, select

from delegate_runtime.errors import JobError
from farm_core.schema import ACTIVE_STATES, SUCCEEDED, Campaign, Job, Result, StoredModel

from . import regression
from .regression import DEFAULT_ALPHA, DEFAULT_THRESHOLD, Verdict

EXIT_OK, EXIT_FAILED, EXIT_REGRESSED = 0, 1, 3


@dataclass
class Cell:
    """One job of the campaign and how it fared."""

    job: int
    model: str  #: lineage name
    device: str
    config: str
    state: str
    reason: str
    seconds: float | None
    verdict: Verdict | None = None
    baseline_campaign: int | None = None

    @property
    def failed(self) -> bool:
        return self.state != SUCCEEDED

    @property
    def regressed(self) -> bool:
        return self.verdict is not None and self.verdict.regressed


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
    def exit_code(self) -> int:
        if self.failed:
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
    alpha: float = DEFAULT_ALPHA,
) -> GateReport:
    """Each job's outcome, and each succeeded job's latency against its baseline: the
    `baseline` campaign's result for the same cell (lineage, device, configuration), or
    by default the last good run of that cell. JobError for an unknown campaign."""
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
            else "the last good run of each model, device and configuration",
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
            )
            .join(StoredModel, StoredModel.sha256 == Job.model_sha256)
            .outerjoin(Result, (Result.job_id == Job.id) & (Result.attempt == Job.attempt))
            .where(Job.campaign_id == campaign_id)
            .order_by(Job.model_name, Job.planned_device, Job.config, Job.id)
        ).all()
        for r in rows:
            took = (
                (r.finished_at - r.started_at).total_seconds()
                if r.started_at and r.finished_at
                else None
            )
            cell = Cell(
                r.id,
                r.model_name or r.file_name,
                r.ran_on or r.device_key,
                r.config,
                r.state,
                (r.error or r.reason or "").strip(),
                took,
            )
            if r.state == SUCCEEDED and r.result_id is not None:
                cell.verdict, cell.baseline_campaign = _judge_cell(
                    conn, cell, r.result_id, base_id, threshold, alpha
                )
            report.cells.append(cell)
    return report


def _judge_cell(
    conn: Connection,
    cell: Cell,
    result_id: int,
    base_id: int | None,
    threshold: float,
    alpha: float,
) -> tuple[Verdict | None, int | None]:
    history = regression.cell_history(conn, cell.model, cell.device, cell.config, result_id)
    if base_id is None:
        return regression.against_history(history, threshold, alpha)
    base = _baseline_row(conn, base_id, cell)
    if base is None:
        return None, None
    run = regression.sample_or_none(history[-1])
    ref = regression.sample_or_none(base)
    if run is None or ref is None or run.center is None or ref.center is None:
        return None, None
    return regression.judge(run, ref, threshold, alpha), base_id


def _baseline_row(conn: Connection, campaign_id: int, cell: Cell) -> dict[str, Any] | None:
    """The named campaign's newest succeeded result for the same cell."""
    row = (
        conn.execute(
            select(Result.id, Result.outcome, *regression.SAMPLE_COLUMNS)
            .join(Job, Job.id == Result.job_id)
            .where(
                Result.campaign_id == campaign_id,
                Job.model_name == cell.model,
                Result.device_key == cell.device,
                Result.config == cell.config,
                Result.outcome == SUCCEEDED,
            )
            .order_by(Result.id.desc())
            .limit(1)
        )
        .mappings()
        .first()
    )
    return dict(row) if row is not None else None


def still_running(engine: Engine, campaign_id: int) -> int:
    """How many of the campaign's jobs have not ended."""
    with engine.begin() as conn:
        return len(
            conn.execute(
                select(Job.id).where(Job.campaign_id == campaign_id, Job.state.in_(ACTIVE_STATES))
            ).all()
        )


def summary_lines(report: GateReport) -> list[str]:
    """The verdict as text: failed jobs, a regressions section, then one verdict line."""
    lines = []
    if report.failed:
        lines.append(f"failed jobs ({len(report.failed)}):")
        lines += [
            f"  {c.model} {c.device} {c.config}: {c.state}"
            + (f" ({c.reason.splitlines()[0][:160]})" if c.reason else "")
            for c in report.failed
        ]
    judged = [c for c in report.cells if c.verdict is not None]
    lines.append(
        f"regressions ({len(report.regressions)} of {len(judged)} judged, "
        f"baseline: {report.baseline}):"
    )
    for c in report.regressions:
        lines.append(
            f"  {c.model} {c.device} {c.config}: {c.verdict.describe()} "  # type: ignore[union-attr]
            f"against campaign {c.baseline_campaign}"
        )
    if not report.regressions:
        lines.append("  none")
    word = {EXIT_OK: "passed", EXIT_FAILED: "failed", EXIT_REGRESSED: "regressed"}
    lines.append(
        f"campaign {report.campaign_id}: {word[report.exit_code]} "
        f"(exit {report.exit_code}): {len(report.cells)} jobs, {len(report.failed)} failed, "
        f"{len(report.regressions)} regressed"
    )
    return lines
