"""t2.experiments.statistics.welch: Student's t quantile (scipy's) against published values,
Welch's interval
by hand, and its coverage under the null (identical arms) by simulation."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from t2.experiments.statistics.welch import mean, sd, t_quantile, welch

# two-sided 95% and 90% critical values of Student's t (any statistics table; R's qt)
T975 = {
    1: 12.7062,
    2: 4.3027,
    3: 3.1824,
    4: 2.7764,
    5: 2.5706,
    10: 2.2281,
    20: 2.0860,
    30: 2.0423,
    60: 2.0003,
    120: 1.9799,
}
T95 = {1: 6.3138, 2: 2.9200, 5: 2.0150, 10: 1.8125, 30: 1.6973}


@pytest.mark.parametrize("df", sorted(T975))
def test_t_quantile_matches_the_table_at_975(df):
    assert t_quantile(0.975, df) == pytest.approx(T975[df], abs=5e-4)
    assert t_quantile(0.025, df) == pytest.approx(-T975[df], abs=5e-4)


@pytest.mark.parametrize("df", sorted(T95))
def test_t_quantile_matches_the_table_at_95(df):
    assert t_quantile(0.95, df) == pytest.approx(T95[df], abs=5e-4)


def test_t_quantile_tends_to_the_normal_and_takes_fractional_degrees():
    assert t_quantile(0.975, math.inf) == pytest.approx(1.959964, abs=1e-6)
    assert t_quantile(0.975, 1e6) == pytest.approx(1.959964, abs=1e-4)
    assert T975[2] < t_quantile(0.975, 1.5) < T975[1]  # Welch's df lie between table rows
    with pytest.raises(ValueError):
        t_quantile(1.0, 3)


def test_mean_and_sample_sd():
    assert mean([1.0, 2.0, 6.0]) == 3.0
    assert sd([1.0, 2.0, 6.0]) == pytest.approx(math.sqrt(7.0))  # (4 + 1 + 9) / 2
    assert sd([5.0]) is None


def test_welch_interval_by_hand():
    # equal variances (1) and sizes (3): df = 2 (n - 1) = 4, se = sqrt(2/3)
    d = welch([4.0, 5.0, 6.0], [1.0, 2.0, 3.0])
    assert d.df == pytest.approx(4.0)
    half = 2.776445 * math.sqrt(2 / 3)
    assert (d.diff, d.low, d.high) == pytest.approx((3.0, 3.0 - half, 3.0 + half), abs=1e-5)
    assert not d.contains_zero()
    # unequal variances: Welch-Satterthwaite
    a, b = [10.0, 12.0, 17.0, 9.0], [11.0, 11.5]
    va, vb = 12.6667 / 4, 0.125 / 2
    d = welch(a, b)
    assert d.df == pytest.approx((va + vb) ** 2 / (va**2 / 3 + vb**2 / 1), rel=1e-4)
    assert d.contains_zero()


def test_identical_arms_contain_zero_and_a_clearly_better_arm_does_not():
    same = [3.41, 3.38, 3.45]
    assert welch(same, same).contains_zero()
    assert welch([3.40, 3.47, 3.39], [3.41, 3.38, 3.45]).contains_zero()
    better = welch([2.91, 2.95, 2.88], [3.41, 3.38, 3.45])
    assert better.has_interval and not better.contains_zero() and better.high < 0


def test_one_seed_gives_no_interval():
    d = welch([3.0], [3.5, 3.6])
    assert d.diff == pytest.approx(-0.55) and not d.has_interval and not d.contains_zero()


def test_coverage_under_the_null_is_about_95_percent():
    rng = random.Random(0)
    trials, hits = 1500, 0
    for _ in range(trials):
        a = [rng.gauss(0.0, 1.0) for _ in range(3)]
        b = [rng.gauss(0.0, 1.0) for _ in range(3)]
        hits += welch(a, b).contains_zero()
    assert 0.93 < hits / trials < 0.985  # Welch is slightly conservative at small n


def test_seeds_needed_match_cohens_table():
    """Two-sided two-sample t-test at 5%, 80% power (Cohen 1988, table 2.4.1): an effect of
    one standard deviation needs 17 per group, half of one 64, 0.8 of one 26."""
    from t2.experiments.statistics.welch import power, seeds_needed

    assert seeds_needed(1.0, 1.0) == 17
    assert seeds_needed(2.0, 1.0) == 64
    assert seeds_needed(1.0, 0.8) == 26
    assert power(17, 1.0, 1.0) >= 0.8 > power(16, 1.0, 1.0)
    assert seeds_needed(0.0, 0.5) == 2 and power(1, 1.0, 1.0) == 0.0
    assert seeds_needed(10.0, 0.1, most=50) == 51  # beyond reach: said, not looped forever


def test_paired_seeds_match_gpowers_one_sample_table_and_the_floor_simulates():
    """A paired t-test is a one-sample t-test on the differences: at 5%, 80% power, G*Power
    gives 199 for an effect of 0.2 standard deviations, 34 for 0.5, 15 for 0.8, 10 for 1.
    A floor (variance the seeds share) leaves power where simulated paired tests put it."""
    from t2.experiments.statistics.welch import paired_power, seeds_needed

    for effect, n in ((0.2, 199), (0.5, 34), (0.8, 15), (1.0, 10)):
        assert seeds_needed(1.0, effect, paired=True) == n
        assert paired_power(n, 1.0, effect) >= 0.8 > paired_power(n - 1, 1.0, effect)
    rng = np.random.default_rng(5)  # 8 seeds, sd 1, a shared shift of sd 0.3, difference 1
    d = 1.0 + rng.normal(0.0, 0.3, (20_000, 1)) + rng.normal(0.0, 1.0, (20_000, 8))
    se = np.sqrt(d.var(axis=1, ddof=1) / 8 + 0.09)
    hits = (np.abs(d.mean(axis=1)) / se > t_quantile(0.975, 7)).mean()
    assert hits == pytest.approx(paired_power(8, 1.0, 1.0, floor=0.09), abs=0.015)
    assert seeds_needed(1.0, 1.0, paired=True, floor=0.2) == 1001  # the floor alone is too wide


# chi-square quantiles at 0.10 and 0.90 (any statistics table; R's qchisq)
CHI2 = {1: (0.01579, 2.706), 2: (0.2107, 4.605), 6: (2.204, 10.645), 10: (4.865, 15.987)}


@pytest.mark.parametrize("df", sorted(CHI2))
def test_spread_interval_matches_the_chi_square_table(df):
    """An sd measured on df degrees of freedom: sigma lies in s sqrt(df / chi2) at 80%."""
    from t2.experiments.statistics.welch import spread_interval

    low, high = spread_interval(2.0, df)
    assert low == pytest.approx(2.0 * math.sqrt(df / CHI2[df][1]), rel=1e-3)
    assert high == pytest.approx(2.0 * math.sqrt(df / CHI2[df][0]), rel=1e-3)
    with pytest.raises(ValueError, match="df >= 1"):
        spread_interval(2.0, 0)
