"""orchestrator.regression: the Mann-Whitney U test against its definition (pair counts and
the permutation distribution, enumerated), and the verdicts the CI gate and the History
page give on repeated identical runs and on a slowed model."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from orchestrator import regression
from orchestrator.regression import Sample, chain, judge, mann_whitney_greater, mann_whitney_u


def _pairs_u(x, y) -> float:
    """U by its definition: pairs with x > y, ties one half."""
    return sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in x for b in y)


def _enumerated_p(x, y) -> float:
    """P(U >= observed) over every split of the pooled values into samples of |x| and |y|
    (the permutation distribution the test approximates); U = the split's rank sum minus
    m(m+1)/2, a value's rank = values below it + (values equal to it + 1) / 2."""
    pooled = np.concatenate([np.asarray(x, float), np.asarray(y, float)])
    m = len(x)
    ranks = np.array([(pooled < v).sum() + ((pooled == v).sum() + 1) / 2 for v in pooled])
    splits = np.array(list(itertools.combinations(range(len(pooled)), m)))
    u = ranks[splits].sum(axis=1) - m * (m + 1) / 2
    return float((u >= _pairs_u(x, y) - 1e-9).mean())


@pytest.mark.parametrize(
    ("x", "y"),
    [
        ([1.0, 2.0, 3.0], [0.5, 2.5]),
        ([5, 5, 6, 7], [5, 6, 6, 1, 2]),
        ([1.1] * 4, [1.1] * 3),
    ],
)
def test_u_is_the_pair_count(x, y) -> None:
    assert mann_whitney_u(x, y) == _pairs_u(x, y)


@pytest.mark.parametrize(
    ("x", "y"),
    [
        ([3.1, 4.2, 5.3, 6.4], [1.0, 2.0, 3.0]),
        ([1.5, 2.5, 9.0, 4.5, 7.7], [1.0, 3.3, 4.0, 6.1, 8.2, 0.3]),
        ([0.1, 0.2], [0.3, 0.4, 0.5]),
    ],
)
def test_exact_p_is_the_permutation_distribution(x, y) -> None:
    assert mann_whitney_greater(x, y) == pytest.approx(_enumerated_p(x, y), abs=1e-12)


@pytest.mark.parametrize(("shift", "decimals"), [(0.0, 1), (0.6, 1), (1.2, 1), (1.2, 0)])
def test_normal_approximation_is_close_to_the_permutation_distribution(shift, decimals) -> None:
    rng = np.random.default_rng(7)
    # rounded: ties, as rounded latencies have (the normal branch takes them)
    x = np.round(rng.normal(10 + shift, 1.0, 10), decimals)
    y = np.round(rng.normal(10, 1.0, 9), decimals)
    exact, approx = _enumerated_p(x, y), mann_whitney_greater(x, y)
    assert approx == pytest.approx(exact, abs=0.02)
    assert (approx < regression.DEFAULT_ALPHA) == (exact < regression.DEFAULT_ALPHA)


def test_all_equal_runs_are_no_evidence() -> None:
    assert mann_whitney_greater([1.0] * 20, [1.0] * 20) == 1.0


# -- verdicts ---------------------------------------------------------------------------

#: An idle machine: each run's latency within ~2% of the model's, and now and then (2% of
#: runs) an interrupt or a page fault makes one run 3x slower.
IDLE_NOISE, OUTLIER_RATE, OUTLIER_FACTOR = 0.02, 0.02, 3.0


def _idle_runs(rng: np.random.Generator, us: float, n: int = 50) -> tuple[float, ...]:
    runs = us * rng.lognormal(0.0, IDLE_NOISE, n)
    runs[rng.random(n) < OUTLIER_RATE] *= OUTLIER_FACTOR
    return tuple(runs)


def _old_rule(avgs: list[float]) -> list[bool]:
    """The History page's former rule: avg over 10% above the median of the last 5."""
    return [
        i > 0 and avgs[i] / float(np.median(avgs[max(0, i - 5) : i])) - 1 > 0.10
        for i in range(len(avgs))
    ]


@pytest.mark.parametrize("seed", range(20))
def test_repeated_identical_runs_on_an_idle_machine_are_not_flagged(seed) -> None:
    rng = np.random.default_rng(seed)
    campaigns = [Sample(_idle_runs(rng, 2000.0)) for _ in range(6)]
    verdicts = chain(campaigns)
    assert not any(v is not None and v.regressed for v in verdicts)


def test_the_old_rule_flags_identical_idle_runs_the_new_one_does_not() -> None:
    """The issue: "10% over the median of the last 5" flagged runs of an unchanged model."""
    old = new = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        runs = [_idle_runs(rng, 2000.0) for _ in range(6)]
        old += sum(_old_rule([float(np.mean(r)) for r in runs]))
        new += sum(v is not None and v.regressed for v in chain([Sample(r) for r in runs]))
    assert old > 0 and new == 0


@pytest.mark.parametrize("slower", [1.08, 1.5, 4.0])
def test_a_slowed_model_is_flagged(slower) -> None:
    rng = np.random.default_rng(1)
    before = Sample(_idle_runs(rng, 2000.0))
    after = Sample(_idle_runs(rng, 2000.0 * slower))
    v = judge(after, before)
    assert v.regressed and v.method == regression.MANN_WHITNEY
    assert v.change == pytest.approx(slower - 1, abs=0.02) and v.p_value < 1e-6


def test_a_significant_but_tiny_slowdown_is_not_flagged() -> None:
    rng = np.random.default_rng(2)
    before = Sample(tuple(2000 * rng.lognormal(0, 0.01, 3000)))
    after = Sample(tuple(2000 * 1.01 * rng.lognormal(0, 0.01, 3000)))
    v = judge(after, before)
    assert v.p_value < 1e-6 and not v.regressed  # 1% is real, and under the 5% threshold
    assert judge(after, before, threshold=0.005).regressed


def test_a_large_but_noisy_change_on_few_runs_is_not_flagged() -> None:
    v = judge(Sample((100.0, 180.0, 120.0)), Sample((95.0, 150.0, 100.0)))
    assert v.change == pytest.approx(0.2)  # the median is 20% slower ...
    assert not v.regressed and v.p_value > 0.01  # ... but 3 runs each cannot tell


def test_a_regression_stays_flagged_until_it_is_fixed() -> None:
    rng = np.random.default_rng(3)
    fast = [Sample(_idle_runs(rng, 1000.0)) for _ in range(2)]
    slow = [Sample(_idle_runs(rng, 1300.0)) for _ in range(2)]
    fixed = Sample(_idle_runs(rng, 1000.0))
    flags = [v is not None and v.regressed for v in chain([*fast, *slow, fixed])]
    assert flags == [False, False, True, True, False]


def test_failed_runs_are_skipped_in_the_chain() -> None:
    rng = np.random.default_rng(4)
    a, b = Sample(_idle_runs(rng, 1000.0)), Sample(_idle_runs(rng, 1000.0))
    verdicts = chain([a, None, b])
    assert verdicts[0] is None and verdicts[1] is None and not verdicts[2].regressed


def test_aggregates_only_use_welch_z() -> None:
    """benchmark_model prints no per-run times: mean, std and count are tested instead."""
    base = Sample(median=1000.0, mean=1000.0, std=20.0, count=50)
    slow = Sample(median=1100.0, mean=1100.0, std=20.0, count=50)
    noisy = Sample(median=1100.0, mean=1100.0, std=900.0, count=50)
    v = judge(slow, base)
    assert v.method == regression.WELCH_Z and v.regressed
    z = 100 / math.sqrt(2 * 20.0**2 / 50)
    assert v.p_value == pytest.approx(0.5 * math.erfc(z / math.sqrt(2)))
    assert not judge(noisy, base).regressed  # 10% within that spread is not significant


def test_without_any_spread_only_the_threshold_judges() -> None:
    v = judge(Sample(mean=11.5), Sample(mean=10.0))
    assert v.method == regression.THRESHOLD_ONLY and v.p_value is None and v.regressed
    assert not judge(Sample(mean=10.2), Sample(mean=10.0)).regressed


def test_sample_of_a_result_row() -> None:
    s = Sample.of({"runs_us": [3, 1, 2, "x", float("nan")], "avg_us": 2.0, "count": 3})
    assert s.runs == (3.0, 1.0, 2.0) and s.center == 2.0 and s.count == 3
    assert Sample.of({"median_us": 5.0, "avg_us": 6.0}).center == 5.0
