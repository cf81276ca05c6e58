"""The difference of two arms over seeds, paired by seed where they share seeds.

Two arms trained with the same seeds share their data order, initial draws and dropout
masks seed by seed, so their figures correlate across seeds (report 004's test BLEU:
r = 0.44); the per-seed differences are then what varies, and an interval on their mean
is narrower than one that treats the arms as independent samples. On the seeds both arms
have, the interval is Student's paired t (scipy.stats.ttest_rel and its
confidence_interval). Only when the arms share no seed is the interval Welch's, and it is
labelled unpaired (t2.experiments.statistics.welch.welch). The interval that also counts the test
sentences' noise is t2.experiments.statistics.bootstrap's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import scipy.stats

from t2.experiments.statistics.welch import LEVEL, Difference, welch


@dataclass(frozen=True)
class OverSeeds:
    """mean(arm) - mean(baseline) over seeds with its interval, paired or not."""

    paired: bool  # on the seeds both arms have (paired t); else Welch's, unpaired
    n: int  # pairs (paired) or the smaller arm's seeds (unpaired)
    t: Difference  # the t interval: paired t, or Welch's
    p: float | None  # the t-test's two-sided p; None without an interval
    left_out: tuple[int, ...] = ()  # seeds only one arm has (paired: not in the pairs)

    @property
    def method(self) -> str:
        return "paired t" if self.paired else "Welch, unpaired"


def paired_t(arm: list[float], base: list[float], level: float = LEVEL) -> tuple[Difference, float]:
    """The mean of arm[i] - base[i] with Student's paired t interval (n - 1 degrees of
    freedom) and the test's two-sided p: scipy.stats.ttest_rel."""
    diffs = [a - b for a, b in zip(arm, base, strict=True)]
    diff = math.fsum(diffs) / len(diffs)
    if len(diffs) < 2:
        return Difference(diff, None, None, None), math.nan
    if max(diffs) == min(diffs):  # no spread: the interval is the difference itself
        return Difference(diff, diff, diff, math.inf), 0.0 if diff else 1.0
    test = scipy.stats.ttest_rel(arm, base)
    ci = test.confidence_interval(level)
    return Difference(diff, float(ci.low), float(ci.high), float(test.df)), float(test.pvalue)


def over_seeds(
    arm: Mapping[int, float], base: Mapping[int, float], level: float = LEVEL
) -> OverSeeds:
    """Paired by seed on the seeds both have; Welch's (unpaired) when they share none."""
    shared = sorted(set(arm) & set(base))
    left_out = tuple(sorted(set(arm) ^ set(base)))
    if not shared:
        found = welch(list(arm.values()), list(base.values()), level)
        p = None
        if found.has_interval and found.df != math.inf:
            test = scipy.stats.ttest_ind(list(arm.values()), list(base.values()), equal_var=False)
            p = float(test.pvalue)
        return OverSeeds(False, min(len(arm), len(base)), found, p, left_out)
    a, b = [arm[s] for s in shared], [base[s] for s in shared]
    found, p = paired_t(a, b, level)
    return OverSeeds(True, len(shared), found, None if math.isnan(p) else p, left_out)


def correlation(arm: Mapping[int, float], base: Mapping[int, float]) -> float | None:
    """Pearson's r of the two arms' figures across their shared seeds (scipy.stats)."""
    shared = sorted(set(arm) & set(base))
    a, b = [arm[s] for s in shared], [base[s] for s in shared]
    if len(shared) < 3 or len(set(a)) < 2 or len(set(b)) < 2:
        return None
    return float(scipy.stats.pearsonr(a, b).statistic)
