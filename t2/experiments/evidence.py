"""What a verdict reads: one figure's difference between an arm and the baseline on the
seeds they share, with its intervals.

The headline interval counts both sources of noise where it can: for a test figure whose
runs kept their test translations (test BLEU, test chrF), the bootstrap over seeds and
sentences (t2.experiments.bootstrap, BCa); for any other figure, Student's paired t over
seeds (t2.experiments.seeds). At a planned look (t2.experiments.sequential) the interval is
the repeated confidence interval: the difference plus or minus Student's t quantile at the
look's nominal level (n - 1 degrees of freedom) times the headline's standard error (the
bootstrap's, or the paired differences' s / sqrt(n)), which reaches the extreme levels of
early looks that a bootstrap of a few thousand resamples cannot.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from t2.experiments.bootstrap import shared_outputs, two_level
from t2.experiments.metrics import Metric, by_seed, runs_by_seed
from t2.experiments.runs import Run
from t2.experiments.seeds import OverSeeds, over_seeds
from t2.experiments.sequential import Look, repeated_half_width


@dataclass(frozen=True)
class Span:
    """An interval of the difference, the level it holds at and how it was made."""

    diff: float
    low: float
    high: float
    level: float
    method: str

    def contains_zero(self) -> bool:
        return self.low <= 0.0 <= self.high


class Evidence:
    """One figure of an arm against the baseline, on the seeds both have (or, sharing
    none, Welch's unpaired interval)."""

    def __init__(self, metric: Metric, arm: list[Run], base: list[Run]) -> None:
        self.metric = metric
        self.arm, self.base = by_seed(arm, metric), by_seed(base, metric)
        shared = sorted(set(self.arm) & set(self.base))
        self.diffs = [self.arm[s] - self.base[s] for s in shared]
        self.outputs = None
        if metric.sentences:
            self.outputs = shared_outputs(runs_by_seed(arm, metric), runs_by_seed(base, metric))

    @property
    def n(self) -> int:
        return len(self.diffs)

    def over(self, level: float) -> OverSeeds:
        """Paired t over seeds (Welch's when they share none)."""
        return over_seeds(self.arm, self.base, level)

    def two_level(self, level: float) -> Span | None:
        """The bootstrap over seeds and sentences at `level`; None without test outputs
        for two seeds or more."""
        if self.outputs is None:
            return None
        found = two_level(*self.outputs, self.metric.sentences, level)  # type: ignore[arg-type]
        return (
            None if found is None else Span(found.diff, found.low, found.high, level, found.method)
        )

    def headline(self, level: float) -> Span | None:
        """The interval at `level` that counts every source of noise it can; None with
        fewer than two seeds to pair."""
        if (found := self.two_level(level)) is not None:
            return found
        over = self.over(level)
        if not over.t.has_interval:
            return None
        method = f"{over.method} over {over.n} seeds"
        return Span(over.t.diff, over.t.low, over.t.high, level, method)  # type: ignore[arg-type]

    def standard_error(self) -> tuple[float, str] | None:
        """The headline's standard error of the difference and where it comes from."""
        if self.outputs is not None:
            found = two_level(*self.outputs, self.metric.sentences, 0.95)  # type: ignore[arg-type]
            if found is not None:
                return found.standard_error, found.method
        if self.n < 2:
            return None
        return statistics.stdev(self.diffs) / math.sqrt(self.n), f"paired t over {self.n} seeds"

    def repeated(self, look: Look) -> Span | None:
        """The look's repeated confidence interval, at its nominal level."""
        found = self.standard_error()
        if found is None:
            return None
        se, source = found
        diff = statistics.fmean(self.diffs)
        half = repeated_half_width(se, self.n, look)
        method = (
            f"repeated interval at look {look.index} of {look.of}, standard error of the {source}"
        )
        return Span(diff, diff - half, diff + half, 1.0 - look.alpha, method)
