"""Mean, sample standard deviation and Welch's interval for a difference of means.

Student's t quantile is computed here (no scipy): the t distribution's CDF through the
regularised incomplete beta function (Lentz's continued fraction, Numerical Recipes 6.4),
inverted by bisection. It works for the fractional degrees of freedom of Welch's test.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

LEVEL = 0.95  # confidence of every interval the reports print


def mean(values: Sequence[float]) -> float:
    return statistics.fmean(values)


def sd(values: Sequence[float]) -> float | None:
    """Sample standard deviation (n - 1); None for fewer than two values."""
    return statistics.stdev(values) if len(values) > 1 else None


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    out = d
    for m in range(1, 400):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d, c = 1.0 + num * d, 1.0 + num / c
            d, c = 1.0 / (d if abs(d) > tiny else tiny), c if abs(c) > tiny else tiny
            out *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return out


def betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0 or x >= 1.0:
        return 0.0 if x <= 0.0 else 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))  # fmt: skip
    if x < (a + 1.0) / (a + b + 2.0):  # the fraction converges fast on this side
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with `df` degrees of freedom (df may be fractional)."""
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The t value below which a fraction `p` of Student's t distribution lies."""
    if not 0.0 < p < 1.0 or df <= 0:
        raise ValueError(f"t_quantile needs 0 < p < 1 and df > 0, got p={p}, df={df}")
    if math.isinf(df):
        return statistics.NormalDist().inv_cdf(p)
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


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
