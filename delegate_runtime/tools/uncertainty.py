"""How sure a latency is: warm-up until it is stable, and the median's confidence interval.

Warm-up: after benchmark_model's own warm-up (`warmup_runs`, `warmup_min_secs`), windows of
runs continue until two windows in a row have medians within `STABLE_TOLERANCE`, or until
`warmup_max_secs` have passed (the result then says `stable: false`).

The timed runs' median gets a distribution-free 95 % interval from order statistics (the
binomial ranks around n/2, as a sign test would give), and the runs split into `TRIALS`
consecutive trials whose medians show drift within the run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

#: Two consecutive warm-up windows whose medians differ by at most this are stable.
STABLE_TOLERANCE = 0.03
#: A warm-up window: this much time (s) of runs, at least MIN and at most MAX runs.
WINDOW_S = 0.2
WINDOW_MIN_RUNS, WINDOW_MAX_RUNS = 3, 200
#: The timed runs are split into this many consecutive trials.
TRIALS = 5
Z_95 = 1.959963984540054


def window_runs(last_run_us: float) -> int:
    """Runs in a warm-up window for a model whose last run took `last_run_us`."""
    fit = int(WINDOW_S * 1e6 / max(last_run_us, 1.0))
    return max(WINDOW_MIN_RUNS, min(WINDOW_MAX_RUNS, fit))


def settled(previous: Sequence[float], current: Sequence[float]) -> bool:
    """Whether two consecutive windows' medians agree within STABLE_TOLERANCE."""
    if not previous or not current:
        return False
    a, b = float(np.median(previous)), float(np.median(current))
    return a > 0 and abs(b / a - 1.0) <= STABLE_TOLERANCE


def median_interval(values: Sequence[float], z: float = Z_95) -> tuple[float, float] | None:
    """A distribution-free interval for the median of `values` (about 95 %): the order
    statistics at ranks n/2 ∓ z·√n/2; None for fewer than 6 values (too few for it)."""
    n = len(values)
    if n < 6:
        return None
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    half = z * math.sqrt(n) / 2.0
    lo = max(0, int(math.floor(n / 2.0 - half)) - 1)
    hi = min(n - 1, int(math.ceil(n / 2.0 + half)))
    return float(ordered[lo]), float(ordered[hi])


def trial_medians(values: Sequence[float], trials: int = TRIALS) -> list[float]:
    """The medians of `trials` consecutive, near-equal slices of the runs."""
    if len(values) < trials:
        return []
    return [float(np.median(part)) for part in np.array_split(np.asarray(values), trials)]


def summary(
    values: Sequence[float],
    warmup_runs: int,
    stable: bool,
    cpu_us: float | None,
    median: float | None = None,
) -> dict[str, Any]:
    """The uncertainty record stored with a result; `median`: the caller's own (TFLite's
    percentile, so that both figures agree), else numpy's."""
    if median is None and len(values):
        median = float(np.median(values))
    interval = median_interval(values)
    trials = trial_medians(values)
    spread = (max(trials) - min(trials)) / median if trials and median else None
    return {
        "median_us": median,
        "ci95_us": list(interval) if interval else None,
        "runs": len(values),
        "trials": len(trials),
        "trial_medians_us": trials,
        "trial_spread": None if spread is None else round(spread, 4),
        "warmup_runs": warmup_runs,
        "stable": stable,
        "cpu_time_per_inference_us": cpu_us,
    }
