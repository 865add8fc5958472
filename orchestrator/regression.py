"""Latency regressions within runs: one result's raw runs against another's.

A run regressed against a reference run when both hold:
- it is slower beyond noise: a one-sided Mann-Whitney U test on the raw per-run latencies
  (`benchmark.runs_us`) gives p < `alpha` (0.01); results that kept only aggregates
  (benchmark_model prints no per-run times) use a one-sided Welch z-test on mean, std and
  count instead;
- it is slower by enough to matter: its median latency exceeds the reference's by more
  than `threshold` (0.05: 5%).

This sees the noise within one run only, not from run to run (a busy host moves a whole
run), so it judges the dashboard's History page but not a build: the CI gate judges a run
against its cell's history (orchestrator.history) and confirms a suspect with paired runs
(orchestrator.confirm).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from farm_core.schema import SUCCEEDED, Result

#: A run regressed when its median is slower than its baseline's by more than this ...
DEFAULT_THRESHOLD = 0.05
#: ... and a one-sided test says it is slower at p below this.
DEFAULT_ALPHA = 0.01
#: Both samples this small and without ties: the exact U distribution, else the normal one.
EXACT_MAX_RUNS = 8
MANN_WHITNEY, WELCH_Z, THRESHOLD_ONLY = "mann-whitney", "welch-z", "threshold only"


@dataclass(frozen=True)
class Sample:
    """One run's latencies: raw per-run times, else aggregates (µs)."""

    runs: tuple[float, ...] = ()
    median: float | None = None
    mean: float | None = None
    std: float | None = None
    count: int | None = None
    low: float | None = None  #: the fastest run, where only aggregates were kept

    @property
    def center(self) -> float | None:
        """The median (of the raw runs when there are some), else the mean."""
        if len(self.runs) >= 2:
            return float(np.median(self.runs))
        return self.median if self.median else self.mean

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Sample:
        """From a result's columns: `runs_us`, `median_us`, `avg_us`, `std_us`, `count`,
        `min_us`."""
        runs = row.get("runs_us") or ()
        clean = tuple(float(r) for r in runs if isinstance(r, int | float) and math.isfinite(r))
        return cls(
            clean,
            _num(row.get("median_us")),
            _num(row.get("avg_us")),
            _num(row.get("std_us")),
            int(row["count"]) if isinstance(row.get("count"), int | float) else None,
            _num(row.get("min_us")),
        )


def _num(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


@dataclass(frozen=True)
class Verdict:
    """A run against its baseline: the median's relative change (0.07: 7% slower), the
    one-sided p-value (None: no spread to test with) and whether it regressed."""

    change: float | None
    p_value: float | None
    regressed: bool
    method: str

    def describe(self) -> str:
        p = "" if self.p_value is None else f", p={self.p_value:.2g}"
        change = "unknown" if self.change is None else f"{self.change:+.1%}"
        return f"median {change}{p} ({self.method})"


# -- the tests ------------------------------------------------------------------------------


def _ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties given their average rank."""
    order = np.argsort(values, kind="mergesort")
    sorted_vals = values[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_vals)) + 1]
    ends = np.r_[starts[1:], len(values)]
    avg = (starts + ends + 1) / 2.0  # mean of ranks start+1 .. end
    ranks = np.empty(len(values))
    ranks[order] = np.repeat(avg, ends - starts)
    return ranks


def mann_whitney_u(x: Sequence[float], y: Sequence[float]) -> float:
    """U of `x`: the pairs (xi, yj) with xi > yj, ties counting one half."""
    xs, ys = np.asarray(x, float), np.asarray(y, float)
    ranks = _ranks(np.concatenate([xs, ys]))
    return float(ranks[: len(xs)].sum() - len(xs) * (len(xs) + 1) / 2.0)


def _exact_upper_tail(u: float, m: int, n: int) -> float:
    """P(U >= u) under the null for samples of m and n without ties (U's distribution by
    the recursion f(m, n) = f(m-1, n) shifted by n, plus f(m, n-1))."""
    size = m * n + 1
    # counts[j][k]: the distribution of U for samples of j and k (as number of orderings)
    prev = [np.zeros(size) for _ in range(n + 1)]
    for k in range(n + 1):
        prev[k][0] = 1.0  # j = 0: U is 0
    for _ in range(1, m + 1):
        cur = [np.zeros(size) for _ in range(n + 1)]
        cur[0][0] = 1.0  # k = 0: U is 0
        for k in range(1, n + 1):
            cur[k][k:] += prev[k][: size - k]  # the largest value is an x: beats all k y's
            cur[k] += cur[k - 1]  # the largest value is a y
        prev = cur
    dist = prev[n]
    return float(dist[int(math.ceil(u - 1e-9)) :].sum() / dist.sum())


def mann_whitney_greater(x: Sequence[float], y: Sequence[float]) -> float:
    """One-sided p-value that `x` tends to be larger than `y` (Mann-Whitney U): exact for
    small samples without ties, else the normal approximation with the tie and continuity
    corrections (as scipy.stats.mannwhitneyu's `method="auto"`)."""
    m, n = len(x), len(y)
    if m == 0 or n == 0:
        raise ValueError("Mann-Whitney U needs two non-empty samples")
    u = mann_whitney_u(x, y)
    both = np.concatenate([np.asarray(x, float), np.asarray(y, float)])
    _, ties = np.unique(both, return_counts=True)
    if m <= EXACT_MAX_RUNS and n <= EXACT_MAX_RUNS and (ties == 1).all():
        return _exact_upper_tail(u, m, n)
    big = m + n
    tie_term = float((ties**3 - ties).sum()) / (big * (big - 1))
    var = m * n / 12.0 * ((big + 1) - tie_term)
    if var <= 0:
        return 1.0  # every value equal: no evidence either way
    z = (u - m * n / 2.0 - 0.5) / math.sqrt(var)
    return _normal_upper_tail(z)


def welch_z_greater(x: Sample, y: Sample) -> float | None:
    """One-sided p-value that `x`'s mean exceeds `y`'s, from mean, std and count (Welch's
    statistic against the normal distribution: fine for the usual 50 runs); None when a
    spread or count is unknown."""
    parts = (x.mean, y.mean, x.std, y.std, x.count, y.count)
    if any(v is None for v in parts) or not x.count or not y.count:
        return None
    se = math.sqrt(x.std**2 / x.count + y.std**2 / y.count)  # type: ignore[operator]
    if se == 0:
        return 0.0 if x.mean > y.mean else 1.0  # type: ignore[operator]
    return _normal_upper_tail((x.mean - y.mean) / se)  # type: ignore[operator]


def _normal_upper_tail(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def judge(
    run: Sample,
    baseline: Sample,
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
) -> Verdict:
    """Whether `run` regressed against `baseline` (see the module's docstring)."""
    now, before = run.center, baseline.center
    change = now / before - 1.0 if now is not None and before else None
    if len(run.runs) >= 2 and len(baseline.runs) >= 2:
        p, method = mann_whitney_greater(run.runs, baseline.runs), MANN_WHITNEY
    else:
        p = welch_z_greater(run, baseline)
        method = WELCH_Z if p is not None else THRESHOLD_ONLY
    slower = change is not None and change > threshold
    return Verdict(change, p, slower and (p is None or p < alpha), method)


def chain(
    samples: Sequence[Sample | None],
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
) -> list[Verdict | None]:
    """Each run of one cell (oldest first; None: it did not succeed) against the last good
    run before it; None where there is no baseline (the first) or no run."""
    out: list[Verdict | None] = []
    good: Sample | None = None
    for s in samples:
        if s is None or s.center is None:
            out.append(None)
            continue
        verdict = judge(s, good, threshold, alpha) if good is not None else None
        out.append(verdict)
        if verdict is None or not verdict.regressed:
            good = s
    return out


# -- the results they read ------------------------------------------------------------------

#: Result figures a Sample is made of (`Sample.of` reads these keys).
SAMPLE_COLUMNS = (
    Result.avg_us.label("avg_us"),
    Result.median_us.label("median_us"),
    Result.benchmark["std_us"].as_float().label("std_us"),
    Result.benchmark["count"].as_float().label("count"),
    Result.benchmark["runs_us"].label("runs_us"),
    Result.benchmark["min_us"].as_float().label("min_us"),
)


def sample_or_none(row: Mapping[str, Any]) -> Sample | None:
    """A succeeded result's sample; None for any other outcome."""
    return Sample.of(_fix_counts(row)) if row.get("outcome") == SUCCEEDED else None


def _fix_counts(row: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(row)
    if isinstance(out.get("count"), float):
        out["count"] = int(out["count"])
    return out
