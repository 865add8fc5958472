"""The CI gate's verdict, kept with its campaign (`campaigns.gate`): what `submit --wait`
decided (the exit code, and each suspect's decision with its figures), so that `status`
and `results` show a regression the gate flagged, on any host, later.

Only a verdict on a campaign whose jobs all ended is kept; a newer one replaces it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, update

from farm_core.schema import ACTIVE_STATES, Campaign, utcnow

from .gate import EXIT_FAILED, EXIT_OK, EXIT_REGRESSED, GateReport

#: exit code -> the verdict's word, as the gate's summary line says it.
WORDS = {EXIT_OK: "passed", EXIT_FAILED: "failed", EXIT_REGRESSED: "regressed"}


def as_record(report: GateReport) -> dict[str, Any]:
    """The verdict as stored: `{exit_code, verdict, baseline, at, jobs}`, `jobs` holding
    each suspect's `{decision, details}` by job id."""
    return {
        "exit_code": report.exit_code,
        "verdict": WORDS[report.exit_code],
        "baseline": report.baseline,
        "at": utcnow().isoformat(timespec="seconds"),
        "jobs": {
            str(c.job): {"decision": c.decision(), "details": c.details()}
            for c in report.cells
            if c.suspect
        },
    }


def record(engine: Engine, report: GateReport) -> bool:
    """Keep the report's verdict with its campaign; False (nothing kept) while a job of it
    has not ended."""
    if any(c.state in ACTIVE_STATES for c in report.cells):
        return False
    with engine.begin() as conn:
        conn.execute(
            update(Campaign).where(Campaign.id == report.campaign_id).values(gate=as_record(report))
        )
    return True


def summary(verdict: dict[str, Any] | None) -> str:
    """`gate: regressed (exit 3)`, or "" when no verdict was kept."""
    if not verdict:
        return ""
    return f"gate: {verdict['verdict']} (exit {verdict['exit_code']})"


def job_decision(verdict: dict[str, Any] | None, job_id: int) -> tuple[str, list[str]]:
    """What the kept verdict decided of one job (`regressed, confirmed`) and its figures;
    ("", []) when it was no suspect."""
    said = ((verdict or {}).get("jobs") or {}).get(str(job_id)) or {}
    return str(said.get("decision", "")), [str(d) for d in said.get("details", [])]
