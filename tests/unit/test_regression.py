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


# -- the gate's decision: a run against its cell's history (orchestrator.history) ---------

from orchestrator import confirm, history  # noqa: E402
from orchestrator.history import Past, good_history  # noqa: E402

A, B = "a" * 64, "b" * 64


def _past(figures, sha: str = A) -> list[Past]:
    return [Past(float(f), sha, i + 1) for i, f in enumerate(figures)]


def _row(figure: float, i: int, sha: str = A) -> dict:
    """A succeeded result of the cell as `history.cell_rows` gives it."""
    return {"outcome": "succeeded", "runs_us": [figure * 1.3, figure], "model_sha256": sha,
            "campaign": i + 1, "job": 100 + i}  # fmt: skip


def _busy(rng: np.random.Generator, us: float, n: int, spread: float) -> np.ndarray:
    """n figures of one model on a busy host: lognormal noise from run to run, and 1 run in
    8 twice as slow (no run of its job got a CPU to itself)."""
    figures = us * rng.lognormal(0.0, spread, n)
    figures[rng.random(n) < 1 / 8] *= 2.0
    return figures


def test_a_lucky_fast_run_does_not_become_the_reference() -> None:
    figures = [1000.0, 1010.0, 990.0, 700.0, 1005.0, 995.0]  # the 4th was lucky
    v = history.judge(1000.0, _past(figures))
    assert v.baseline_us == pytest.approx(997.5)  # the median, not the lucky 700
    assert not v.suspect and v.change == pytest.approx(0.0025, abs=1e-4)
    # kept as the reference (the old sticky "last good"), the lucky run made it +43%
    assert not history.judge(1000.0, _past([700.0] * 10)).noise.prior
    assert history.judge(1000.0, _past([700.0] * 10)).suspect


def test_the_issue_s_resubmissions_are_not_suspect_against_their_history() -> None:
    """The issue: one model resubmitted under one name on a busy host, each run +126% to
    +436% against the sticky lucky run; against the median and learned noise of 20 such
    runs, none of the six is suspect."""
    rng = np.random.default_rng(11)
    lucky = 1000.0
    past = _past(lucky * np.exp(rng.uniform(np.log(1.5), np.log(5.5), 20)))
    for resubmitted in (2.26, 3.1, 4.0, 5.36, 2.8, 3.5):
        v = history.judge(lucky * resubmitted, past)
        assert not v.suspect, v.describe()
        assert resubmitted - 1 > history.DEFAULT_THRESHOLD  # what the old gate failed on


def test_a_noisy_20_run_history_teaches_its_noise() -> None:
    """The learned noise of 20 runs, over 500 histories of a 25% spread: centred on it, and
    as close as 20 runs allow (the MAD's own spread)."""
    sigmas = [
        history.noise_of(1000.0 * np.random.default_rng(seed).lognormal(0.0, 0.25, 20)).sigma
        for seed in range(500)
    ]
    assert np.median(sigmas) == pytest.approx(0.25, rel=0.1)
    assert np.percentile(sigmas, 5) > 0.12 and np.percentile(sigmas, 95) < 0.38
    assert not history.noise_of([1000.0] * 20).prior and history.noise_of([1000.0] * 4).prior


def test_an_unchanged_model_on_a_noisy_20_run_history_is_not_flagged() -> None:
    """2000 builds of an unchanged model, each against a 20-run history of the busy host:
    few are suspect, and the suspects' paired runs (adjacent jobs: 3% apart, one in 8
    twice as slow) confirm almost none. Its own rates, not one lucky seed."""
    suspects = flagged = 0
    builds = 2000
    for seed in range(builds):
        rng = np.random.default_rng(seed)
        figures = _busy(rng, 1000.0, 21, spread=0.25)
        past = good_history([_row(f, i) for i, f in enumerate(figures[:-1])])
        if not history.judge(float(figures[-1]), past).suspect:
            continue
        suspects += 1
        pairs = _busy(rng, 1000.0, 3, 0.03), _busy(rng, 1000.0, 3, 0.03)
        flagged += confirm.decide(list(pairs[1] / pairs[0]))[0]
    assert suspects / builds < 0.15  # each costs a confirmation
    assert flagged / builds < 0.01, flagged


def test_the_same_noisy_runs_against_the_last_run_alone_are_flagged() -> None:
    """What the gate did before, one run as the reference: it fails on that noise."""
    flagged = 0
    for seed in range(100):
        figures = _busy(np.random.default_rng(seed), 1000.0, 21, spread=0.25)
        flagged += figures[-1] / figures[-2] - 1 > history.DEFAULT_THRESHOLD
    assert flagged > 30


@pytest.mark.parametrize("seed", range(10))
def test_a_ten_percent_slowdown_with_small_noise_is_suspect(seed) -> None:
    rng = np.random.default_rng(seed)
    past = _past(1000.0 * rng.lognormal(0.0, 0.01, 20))
    v = history.judge(1100.0 * float(rng.lognormal(0.0, 0.01)), past)
    assert v.suspect and v.change == pytest.approx(0.10, abs=0.04), v.describe()
    assert not history.judge(1000.0 * float(rng.lognormal(0.0, 0.01)), past).suspect


def test_a_slowdown_within_the_learned_noise_is_not_suspect() -> None:
    past = _past(1000.0 * np.random.default_rng(5).lognormal(0.0, 0.08, 20))
    v = history.judge(1100.0, past)
    assert v.change > history.DEFAULT_THRESHOLD and not v.suspect, v.describe()


def test_with_too_little_history_only_a_large_change_is_suspect() -> None:
    past = _past([1000.0, 1002.0])  # 2 runs: the noise is the prior, 10%
    v = history.judge(1150.0, past)
    assert v.noise.prior and v.noise.sigma == history.PRIOR_NOISE and not v.suspect
    assert "prior" in v.describe() and "too few" in v.describe()
    assert history.judge(1300.0, past).suspect  # log(1.3) > 2 x 10%


def test_without_history_a_run_is_not_judged() -> None:
    v = history.judge(5000.0, [])
    assert not v.judged and not v.suspect and "not judged" in v.describe()


def test_identical_figures_leave_the_noise_at_its_floor() -> None:
    past = _past([1000.0] * 10)
    assert history.judge(1000.0, past).noise.sigma == history.NOISE_FLOOR
    assert not history.judge(1040.0, past).suspect  # under the 5% threshold
    assert history.judge(1060.0, past).suspect  # over it, and over 2 x 1%


def test_a_regression_stays_suspect_until_it_is_fixed() -> None:
    """Confirmed regressions are no part of the good history: resubmitted, they stay
    suspect; suspects their confirmation cleared are noise and stay in."""
    rng = np.random.default_rng(3)
    fast = [_row(f, i) for i, f in enumerate(1000.0 * rng.lognormal(0, 0.01, 10))]
    slow = [_row(1300.0, 10 + i, B) for i in range(12)]  # resubmitted 12 times
    confirmed = {r["job"] for r in slow}
    past = good_history(fast + slow, confirmed)
    assert len(past) == 10 and {p.model_sha256 for p in past} == {A}
    v = history.judge(1300.0, past)
    assert v.suspect and v.baseline_sha256 == A  # the slow runs did not become the baseline
    assert not history.judge(1000.0, past).suspect  # fixed
    absorbed = good_history(fast + slow)  # had no confirmation confirmed them
    assert not history.judge(1300.0, absorbed).suspect


def test_the_baseline_version_is_the_one_most_runs_measured() -> None:
    assert (
        history.judge(1000.0, _past([1000.0] * 6, A) + _past([1000.0] * 4, B)).baseline_sha256 == A
    )
    tie = _past([1000.0] * 5, A) + _past([1000.0] * 5, B)
    assert history.judge(1000.0, tie).baseline_sha256 == B  # the newest on a tie


def test_a_result_counts_by_its_fastest_run() -> None:
    assert history.figure(Sample((1200.0, 950.0, 40000.0))) == 950.0
    assert history.figure(Sample(median=1000.0, mean=1100.0, low=900.0)) == 900.0
    assert history.figure(Sample(median=1000.0, mean=1100.0)) == 1000.0
    assert history.figure(Sample()) is None and history.figure(None) is None


# -- confirmation by paired runs (orchestrator.confirm) ------------------------------------


def test_slower_in_every_pair_beyond_the_threshold_is_confirmed() -> None:
    regressed, why = confirm.decide([1.09, 1.12, 1.10])
    assert regressed and "every pair" in why and "+10.0%" in why


@pytest.mark.parametrize(
    ("ratios", "because"),
    [
        ([1.02, 1.04, 1.03], "within the 5.0% bar"),  # consistent, but small
        ([1.30, 0.98, 1.25], "1 pair(s) were not slower"),  # large, but not consistent
        ([1.0, 1.2, 1.2], "1 pair(s) were not slower"),  # a tie is not slower
    ],
)
def test_small_or_inconsistent_pairs_clear_a_suspect(ratios, because) -> None:
    regressed, why = confirm.decide(ratios)
    assert not regressed and because in why


def test_pairs_within_the_cells_noise_clear_a_suspect() -> None:
    """The bar is the cell's noise where that exceeds the threshold: CI's busy-host pairs
    (+6.8% median) against a 3-run history's prior of 10% are no evidence."""
    prior = history.Noise(sigma=0.10, runs=3, prior=True)
    assert confirm.bar(0.05, prior) == 0.10 and confirm.bar(0.05, None) == 0.05
    assert confirm.bar(0.05, history.Noise(sigma=0.02, runs=20, prior=False)) == 0.05
    regressed, why = confirm.decide([1.024, 1.068, 1.442], confirm.bar(0.05, prior))
    assert not regressed and "+6.8%, within the 10.0% bar" in why
    assert confirm.decide([1.024, 1.068, 1.442], 0.05)[0]  # what the 5% threshold said


def test_the_same_model_in_pairs_is_not_confirmed() -> None:
    """B and C the same version: 1000 confirmations of 3 pairs with 3% noise between jobs."""
    rng = np.random.default_rng(0)
    ratios = rng.lognormal(0.0, 0.03, (1000, 3)) / rng.lognormal(0.0, 0.03, (1000, 3))
    confirmed = sum(confirm.decide(list(r))[0] for r in ratios)
    assert confirmed / 1000 < 0.02
