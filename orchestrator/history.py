"""A cell's history: its baseline, its run-to-run noise, and whether a new run is suspect.

A cell is one model lineage (job `model_name`) of one project on one device in one
configuration,
measured under one configuration record (`results.config_fingerprint`): results with
different records are never compared, so a cell's history holds only the candidate's own.
Confirmation runs (orchestrator.confirm) are no part of any history.

Each result counts by one figure, its fastest run (`figure`): on a busy host most runs of a
millisecond model wait for a CPU, and their median measures the host (20x apart between
jobs of one model on 2 cores beside 6 busy processes), while the fastest run still
measures the model (within a few percent; docs/benchmarks.md, "The regression gate under
load").

- baseline: the median figure of the last BASELINE_RUNS good results of the cell, never
  one run, so a lucky fast run does not become the reference;
- noise: the spread of those figures from run to run, 1.4826 x the MAD of their logs (a
  robust standard deviation), at least NOISE_FLOOR; below MIN_RUNS results it is not
  learned but at least PRIOR_NOISE (a conservative prior);
- a run is suspect when its figure is slower than the baseline by more than the threshold
  and by more than K_NOISE x the noise; suspects are confirmed or cleared by paired runs;
- good: succeeded and not a confirmed regression (its confirmation campaign said so), so a
  regression stays suspect until it is fixed, while a suspect that its confirmation
  cleared is noise and stays in; no good result before: not judged.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Connection, select

from farm_core.schema import SUCCEEDED, Campaign, Job, Result

from .regression import DEFAULT_THRESHOLD, SAMPLE_COLUMNS, Sample, sample_or_none

#: How many good results of a cell the baseline and the noise are taken from.
BASELINE_RUNS = 20
#: How many earlier results of a cell are read to find them (failed and suspect ones skipped).
HISTORY_LIMIT = 50
#: Fewer good results than this: the noise is not learned but at least PRIOR_NOISE.
MIN_RUNS = 5
#: Run-to-run noise (a relative standard deviation) assumed with too little history ...
PRIOR_NOISE = 0.10
#: ... and the least ever assumed (identical figures would make any change significant).
NOISE_FLOOR = 0.01
#: A suspect is slower than the baseline by more than this many noise deviations: a
#: screen, not the verdict (a suspect costs a confirmation, a miss lets a regression by).
K_NOISE = 2.0
#: The MAD of a normal sample times this estimates its standard deviation.
MAD_TO_SIGMA = 1.4826
#: The key of a confirmation campaign's settings that names the job it confirms.
CONFIRMS_JOB = "confirms_job"


#: A where-clause on `campaigns`: none of a confirmation's paired runs (they belong to no
#: history: the gate's, the dashboard's).
NOT_A_CONFIRMATION = Campaign.settings[CONFIRMS_JOB].as_integer().is_(None)


def figure(sample: Sample | None) -> float | None:
    """A result's figure (µs): its fastest run; without raw runs the recorded minimum, else
    its median or mean (benchmark_model's aggregates)."""
    if sample is None:
        return None
    if sample.runs:
        return float(min(sample.runs))
    value = sample.low or sample.center
    return value if value and value > 0 else None


@dataclass(frozen=True)
class Past:
    """One earlier good result of the cell."""

    figure_us: float
    model_sha256: str
    campaign: int


@dataclass(frozen=True)
class Noise:
    """The run-to-run noise of a cell: a relative standard deviation, from `runs` results;
    `prior`: too few to learn it, PRIOR_NOISE was assumed."""

    sigma: float
    runs: int
    prior: bool


def noise_of(figures: Sequence[float]) -> Noise:
    """The run-to-run noise of a cell's figures (see the module's docstring)."""
    logs = np.log(np.asarray(figures, float))
    mad = float(np.median(np.abs(logs - np.median(logs)))) if len(logs) else 0.0
    learned = max(NOISE_FLOOR, MAD_TO_SIGMA * mad)
    if len(logs) < MIN_RUNS:
        return Noise(max(PRIOR_NOISE, learned), len(logs), True)
    return Noise(learned, len(logs), False)


@dataclass(frozen=True)
class HistoryVerdict:
    """A run against its cell's history. `change`: the figure's relative change against the
    baseline (0.07: 7% slower); None and not suspect when there was no history."""

    figure_us: float
    baseline_us: float | None
    noise: Noise | None
    change: float | None
    suspect: bool
    #: the version (sha256) most of the baseline's results measured (newest on a tie), and
    #: the campaigns they came from: what a confirmation runs against
    baseline_sha256: str = ""
    baseline_campaigns: tuple[int, ...] = ()

    @property
    def judged(self) -> bool:
        return self.baseline_us is not None

    @property
    def regressed(self) -> bool:
        """Suspect: what the gate fails on when it does not confirm."""
        return self.suspect

    def describe(self) -> str:
        """`fastest run 1.150 ms, +14.2% against 1.007 ms (the median of 10 runs, noise
        ±1.3%)`, or why it was not judged."""
        now = f"fastest run {self.figure_us / 1000:.3f} ms"
        if self.baseline_us is None or self.noise is None or self.change is None:
            return f"{now}: no earlier good result of this cell, not judged"
        n = self.noise
        spread = f"noise ±{n.sigma:.1%}" + (
            f", a prior: {n.runs} run(s) are too few to learn it" if n.prior else ""
        )
        return (
            f"{now}, {self.change:+.1%} against {self.baseline_us / 1000:.3f} ms "
            f"(the median of {n.runs} run(s); {spread})"
        )


def judge(
    figure_us: float,
    past: Sequence[Past],
    threshold: float = DEFAULT_THRESHOLD,
    k: float = K_NOISE,
) -> HistoryVerdict:
    """A run's figure against the good results before it (oldest first; the last
    BASELINE_RUNS count)."""
    recent = list(past)[-BASELINE_RUNS:]
    if not recent:
        return HistoryVerdict(figure_us, None, None, None, False)
    figures = [p.figure_us for p in recent]
    baseline = float(np.median(figures))
    noise = noise_of(figures)
    change = figure_us / baseline - 1.0
    suspect = change > threshold and math.log1p(change) > k * noise.sigma
    return HistoryVerdict(
        figure_us,
        baseline,
        noise,
        change,
        suspect,
        _main_version(recent),
        tuple(sorted({p.campaign for p in recent})),
    )


def _main_version(past: Sequence[Past]) -> str:
    """The sha256 most results measured, the newest of those on a tie."""
    counts = Counter(p.model_sha256 for p in past)
    top = max(counts.values())
    return next(p.model_sha256 for p in reversed(past) if counts[p.model_sha256] == top)


def good_history(
    rows: Sequence[Mapping[str, Any]], regressed_jobs: Set[int] = frozenset()
) -> list[Past]:
    """A cell's earlier results (`cell_rows`, oldest first) that count: those with a figure
    whose job is not among `regressed_jobs` (confirmed regressions)."""
    out = []
    for r in rows:
        value = figure(sample_or_none(r))
        if value is not None and r.get("job") not in regressed_jobs:
            out.append(Past(value, r["model_sha256"], r["campaign"]))
    return out


def cell_rows(
    conn: Connection,
    lineage: str,
    device: str,
    config: str,
    fingerprint: str,
    before_result: int,
) -> list[dict[str, Any]]:
    """The cell's results before one result, oldest first (at most HISTORY_LIMIT), in that
    result's project (another team's model of the same name is another lineage), with
    the same configuration record, none of a confirmation campaign: `id`, `job`,
    `campaign`, `model_sha256`, `outcome` and the figures `regression.Sample.of` reads."""
    its_project = (
        select(Job.project)
        .join(Result, Result.job_id == Job.id)
        .where(Result.id == before_result)
        .scalar_subquery()
    )
    rows = conn.execute(
        select(
            Result.id,
            Result.job_id.label("job"),
            Result.campaign_id.label("campaign"),
            Result.model_sha256,
            Result.outcome,
            *SAMPLE_COLUMNS,
        )
        .join(Job, Job.id == Result.job_id)
        .join(Campaign, Campaign.id == Result.campaign_id)
        .where(
            Job.model_name == lineage,
            Job.project == its_project,
            Result.device_key == device,
            Result.config == config,
            Result.config_fingerprint == fingerprint,
            Result.id < before_result,
            Result.outcome == SUCCEEDED,
            NOT_A_CONFIRMATION,
        )
        .order_by(Result.id.desc())
        .limit(HISTORY_LIMIT)
    ).mappings()
    return [dict(r) for r in rows][::-1]
