"""Warm-up stability and the median's interval (delegate_runtime.tools.uncertainty)."""

from __future__ import annotations

import math

import numpy as np

from delegate_runtime.tools import uncertainty as u


def test_the_median_interval_uses_the_textbook_ranks_for_100_runs():
    # Conover's table (and the binomial): ranks 40 and 61 for n = 100 at 95 %
    values = list(range(1, 101))
    assert u.median_interval(values) == (40.0, 61.0)


def test_the_median_interval_covers_the_true_median_about_95_percent():
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(2000):  # a coverage estimate, one assertion on the rate
        lo, hi = u.median_interval(rng.lognormal(0.0, 0.5, 50))
        hits += lo <= 1.0 <= hi  # the lognormal's median is exp(0) = 1
    assert 0.93 <= hits / 2000 <= 0.985


def test_too_few_runs_have_no_interval():
    assert u.median_interval([1.0, 2.0, 3.0, 4.0, 5.0]) is None


def test_windows_settle_within_the_tolerance_only():
    assert u.settled([100, 101, 99], [102, 101, 100])
    assert not u.settled([100, 101, 99], [110, 108, 109])
    assert not u.settled([], [1, 2, 3])


def test_a_window_holds_about_a_fifth_of_a_second_of_runs():
    assert u.window_runs(1000.0) == 200
    assert u.window_runs(10_000.0) == 20
    assert u.window_runs(3e6) == u.WINDOW_MIN_RUNS


def test_the_summary_keeps_trials_and_cpu_time():
    values = [100.0] * 20 + [110.0] * 20
    s = u.summary(values, warmup_runs=12, stable=True, cpu_us=250.0)
    assert s["trials"] == 5 and s["trial_medians_us"][0] == 100.0
    assert s["trial_medians_us"][-1] == 110.0
    assert math.isclose(s["trial_spread"], 10.0 / 105.0, rel_tol=1e-3)
    assert s["cpu_time_per_inference_us"] == 250.0
    assert s["warmup_runs"] == 12 and s["stable"] is True
