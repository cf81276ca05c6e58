"""What a verdict reads: one figure's difference between an arm and the baseline on the
seeds they share, with its intervals.

The headline interval counts both sources of noise where it can: for a test figure whose
runs kept their test translations (test BLEU, test chrF), Student's t over seeds and
sentences, t(n - 1) sqrt(s^2 / n + the sentence-only variance) (t2.experiments.twoway); for
any other figure, Student's paired t over seeds (t2.experiments.seeds). At a planned look
(t2.experiments.sequential) the interval is the repeated confidence interval: the
difference plus or minus Student's t quantile at the look's nominal level (n - 1 degrees
of freedom) times the headline's standard error, the same statistic the fixed design
reads, so every path to a verdict keeps its level (benchmarks/interval_coverage.py).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from t2.experiments.bootstrap import shared_outputs
from t2.experiments.metrics import Metric, by_seed, runs_by_seed
from t2.experiments.runs import Run
from t2.experiments.seeds import OverSeeds, over_seeds
from t2.experiments.sequential import Look, repeated_half_width
from t2.experiments.twoway import Parts, seeds_and_sentences


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

    def parts(self) -> Parts | None:
        """The mean difference's seed and sentence variance; None without test outputs
        for two seeds or more."""
        if self.outputs is None:
            return None
        return seeds_and_sentences(*self.outputs, self.metric.sentences)  # type: ignore[arg-type]

    def two_level(self, level: float) -> Span | None:
        """Student's t over seeds and sentences at `level`; None without test outputs for
        two seeds or more."""
        if (parts := self.parts()) is None:
            return None
        half = float(parts.half_width(level))
        method = (
            f"t over {parts.df + 1} seeds and their test sentences, {parts.df} df (standard "
            f"error of seeds {parts.seeds**0.5:.2g}, of sentences {parts.sentences**0.5:.2g})"
        )
        return Span(parts.diff, parts.diff - half, parts.diff + half, level, method)

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

    def standard_error(self) -> tuple[float, int, str] | None:
        """The headline's standard error of the difference, its degrees of freedom and
        where it comes from."""
        if (parts := self.parts()) is not None:
            return float(parts.standard_error), parts.df, "t over seeds and sentences"
        if self.n < 2:
            return None
        se = statistics.stdev(self.diffs) / math.sqrt(self.n)
        return se, self.n - 1, f"paired t over {self.n} seeds"

    def repeated(self, look: Look) -> Span | None:
        """The look's repeated confidence interval, at its nominal level."""
        found = self.standard_error()
        if found is None:
            return None
        se, df, source = found
        diff = statistics.fmean(self.diffs)
        half = float(repeated_half_width(se, df, look))
        method = (
            f"repeated interval at look {look.index} of {look.of}, standard error of the {source}"
        )
        return Span(diff, diff - half, diff + half, 1.0 - look.alpha, method)
