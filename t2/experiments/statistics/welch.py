"""Mean, sample standard deviation and Welch's interval for a difference of means; Student's
t quantile is scipy's (scipy.stats.t), which takes Welch's fractional degrees of freedom."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import scipy.stats

LEVEL = 0.95  # confidence of every interval the reports print


def mean(values: Sequence[float]) -> float:
    return statistics.fmean(values)


def sd(values: Sequence[float]) -> float | None:
    """Sample standard deviation (n - 1); None for fewer than two values."""
    return statistics.stdev(values) if len(values) > 1 else None


def t_quantile(p: float, df: float) -> float:
    """The t value below which a fraction `p` of Student's t distribution lies (scipy's;
    `df` may be fractional, as Welch's, or infinite: the normal quantile)."""
    if not 0.0 < p < 1.0 or df <= 0:
        raise ValueError(f"t_quantile needs 0 < p < 1 and df > 0, got p={p}, df={df}")
    return float(scipy.stats.t.ppf(p, df))


@dataclass(frozen=True)
class Difference:
    """mean(arm) - mean(baseline) with Welch's interval; low/high None when a side has n=1."""

    diff: float
    low: float | None
    high: float | None
    df: float | None

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    def contains_zero(self) -> bool:
        return self.has_interval and self.low <= 0.0 <= self.high  # type: ignore[operator]


def bracket(low: float, high: float, digits: int) -> str:
    """An interval as the reports print it: [-0.12, +1.56]."""
    return f"[{low:+.{digits}f}, {high:+.{digits}f}]"


def welch(arm: Sequence[float], baseline: Sequence[float], level: float = LEVEL) -> Difference:
    """The difference of means and its `level` interval from Welch's t (unequal variances,
    Welch-Satterthwaite degrees of freedom). Equal values on both sides give a point."""
    diff = mean(arm) - mean(baseline)
    if len(arm) < 2 or len(baseline) < 2:
        return Difference(diff, None, None, None)
    va, vb = statistics.variance(arm) / len(arm), statistics.variance(baseline) / len(baseline)
    se = math.sqrt(va + vb)
    if se == 0.0:  # no spread at all: the interval is the difference itself
        return Difference(diff, diff, diff, math.inf)
    df = (va + vb) ** 2 / (va**2 / (len(arm) - 1) + vb**2 / (len(baseline) - 1))
    half = t_quantile(0.5 + level / 2.0, df) * se
    return Difference(diff, diff - half, diff + half, df)


POWER = 0.8  # the chance of detecting a true difference that a sweep plans for


def power(n: int, spread: float, difference: float, level: float = LEVEL) -> float:
    """The chance that a two-sided t-test on `n` seeds per arm, seeds spread by `spread`
    (the standard deviation), finds a true difference of `difference` at `level`: the
    noncentral t distribution (scipy.stats.nct), 2n - 2 degrees of freedom."""
    if n < 2:
        return 0.0
    if spread == 0.0:
        return 1.0
    df, ncp = 2 * n - 2, abs(difference) / (spread * math.sqrt(2.0 / n))
    crit = t_quantile(0.5 + level / 2.0, df)
    return float(scipy.stats.nct.sf(crit, df, ncp) + scipy.stats.nct.cdf(-crit, df, ncp))


def paired_power(
    n: int, spread: float, difference: float, level: float = LEVEL, floor: float = 0.0
) -> float:
    """The chance that a two-sided paired t-test on `n` seeds finds a true difference of
    `difference` at `level`, the per-seed differences spread by `spread` and the mean
    difference carrying a further variance `floor` that seeds do not reduce (a test set's
    sampling noise, common to every seed). The test compares mean / sqrt(s^2 / n + floor)
    with Student's t quantile on n - 1 degrees of freedom; that statistic is a noncentral
    t, noncentrality |difference| / sqrt(spread^2 / n + floor), whose degrees of freedom
    are Satterthwaite's (n - 1 without a floor, more with one: part of its denominator is
    known)."""
    if n < 2:
        return 0.0
    sampled = spread**2 / n
    if sampled + floor == 0.0:
        return 1.0
    ncp = abs(difference) / math.sqrt(sampled + floor)
    crit = t_quantile(0.5 + level / 2.0, n - 1)
    if not sampled:  # the denominator is known: a normal statistic
        return float(scipy.stats.norm.sf(crit - ncp) + scipy.stats.norm.cdf(-crit - ncp))
    df = (sampled + floor) ** 2 / (sampled**2 / (n - 1))
    return float(scipy.stats.nct.sf(crit, df, ncp) + scipy.stats.nct.cdf(-crit, df, ncp))


def seeds_needed(
    spread: float,
    difference: float,
    target: float = POWER,
    most: int = 1000,
    level: float = LEVEL,
    paired: bool = False,
    floor: float = 0.0,
) -> int:
    """The fewest seeds per arm whose t-test at `level` (two-sample, or `paired` with its
    `floor`) has `target` power for `difference`; `most` + 1 when even `most` do not."""

    def reach(n: int) -> float:
        if paired:
            return paired_power(n, spread, difference, level, floor)
        return power(n, spread, difference, level)

    return next((n for n in range(2, most + 1) if reach(n) >= target), most + 1)


SPREAD_LEVEL = 0.8  # confidence of the interval on a measured seed spread that plans print


def spread_interval(spread: float, df: int, level: float = SPREAD_LEVEL) -> tuple[float, float]:
    """The `level` interval of a standard deviation measured on `df` degrees of freedom
    (chi-square: df s^2 / sigma^2 ~ chi2(df)); two runs give df 1 and a very wide one."""
    if df < 1:
        raise ValueError(f"spread_interval needs df >= 1, got {df}")
    tail = (1.0 - level) / 2.0
    upper, lower = scipy.stats.chi2.ppf([1.0 - tail, tail], df)
    return spread * math.sqrt(df / upper), spread * math.sqrt(df / lower)
