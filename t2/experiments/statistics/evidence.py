"""What a verdict reads: one figure's difference between an arm and the baseline on the
seeds they share, with its intervals.

The headline interval counts both sources of noise where it can: for a test figure whose
runs kept their test translations (test BLEU, test chrF), Student's t over seeds and
sentences, sqrt((t(n - 1) s / sqrt(n))^2 + (z s_v / sqrt(m))^2) (t2.experiments.statistics.twoway),
and no interval at all without test outputs; for any other figure, Student's paired t over
seeds (t2.experiments.statistics.seeds). At a planned look (t2.experiments.statistics.sequential)
the interval is
the repeated confidence interval: the same statistic read at the look's nominal level, so
every path to a verdict keeps its level (benchmarks/interval_coverage.py).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from t2.experiments.statistics.bootstrap import own_test_sets, shared_outputs
from t2.experiments.statistics.seeds import OverSeeds, over_seeds
from t2.experiments.statistics.sequential import Look, repeated_half_width
from t2.experiments.statistics.twoway import Parts, seeds_and_sentences
from t2.experiments.sweeps.metrics import Metric, by_seed, runs_by_seed
from t2.experiments.sweeps.runs import Run

# a paired t over seeds that each scored on test sentences of their own (a generated task's):
# the seeds' spread holds each test set's noise, so the t counts it
OWN_SETS = ", each on its own test sentences (their spread counts the test sets' noise)"


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
    none and not a test figure, Welch's unpaired interval).

    A test figure's intervals (headline and looks) come from the seeds x sentences table
    alone: its centre is the rescored table's mean, on the same seeds as its variance,
    and a shared seed the table cannot hold (no figure, no test outputs, other sentences)
    is named in the interval's method. Without that table a test figure has no interval:
    the test set's variance cannot be estimated, and a paired or unpaired t over seeds
    would claim a calibration it does not have (`refusal` says why, in one line)."""

    def __init__(self, metric: Metric, arm: list[Run], base: list[Run]) -> None:
        self.metric = metric
        self.arm, self.base = by_seed(arm, metric), by_seed(base, metric)
        shared = sorted(set(self.arm) & set(self.base))
        self.diffs = [self.arm[s] - self.base[s] for s in shared]
        self.outputs = None
        self.left_out: list[str] = []
        self.own_sets = False  # each seed on its own test sentences (a generated task)
        if metric.sentences:
            sides = runs_by_seed(arm, metric), runs_by_seed(base, metric)
            self.outputs = shared_outputs(*sides)
            self.own_sets = self.outputs is None and own_test_sets(*sides) is not None
            if not self.own_sets:
                self.left_out = _left_out(metric, arm, base, self.outputs)

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

    @property
    def refusal(self) -> str | None:
        """Why a test figure has no interval to read a verdict from, in one line; None
        when it has one (or is not a test figure)."""
        if not self.metric.sentences or self.outputs is not None or self.own_sets:
            return None
        if not self.diffs:
            return (
                "no verdict: the arms share no seed, so the test set's variance cannot be "
                "told from the seeds'; run both on the same seeds"
            )
        missing = f" ({'; '.join(self.left_out)})" if self.left_out else ""
        lost = any("no test outputs" in why for why in self.left_out)
        return (
            "no verdict: the test set's variance cannot be estimated without test outputs "
            f"on the same sentences for two seeds or more{missing}"
            + ("; keep each run's test.hyps.txt" if lost else "")
        )

    def two_level(self, level: float) -> Span | None:
        """The t over seeds and sentences at `level`; None without test outputs for two
        seeds or more."""
        if (parts := self.parts()) is None:
            return None
        return Span(parts.diff, *self._around(parts, level), level, self._method(parts))

    def _around(self, parts: Parts, level: float) -> tuple[float, float]:
        half = float(parts.half_width(level))
        return parts.diff - half, parts.diff + half

    def _method(self, parts: Parts) -> str:
        out = (
            f"t over {parts.df + 1} seeds and their test sentences, {parts.df} df (standard "
            f"error of seeds {parts.seeds**0.5:.2g}, of sentences {parts.sentences**0.5:.2g})"
        )
        if self.left_out:
            out += f"; left out: {'; '.join(self.left_out)}"
        return out

    def headline(self, level: float) -> Span | None:
        """The interval at `level` that counts every source of noise it can; None with
        fewer than two seeds to pair, or for a test figure without its table (`refusal`)."""
        if (found := self.two_level(level)) is not None or self._needs_table:
            return found
        over = self.over(level)
        if not over.t.has_interval:
            return None
        method = f"{over.method} over {over.n} seeds{OWN_SETS if self.own_sets else ''}"
        return Span(over.t.diff, over.t.low, over.t.high, level, method)  # type: ignore[arg-type]

    def standard_error(self) -> tuple[float, int, str] | None:
        """The headline's standard error of the difference, its seed part's degrees of
        freedom and where it comes from."""
        if (parts := self.parts()) is not None:
            return float(parts.standard_error), parts.df, "t over seeds and sentences"
        if self.n < 2 or self._needs_table:
            return None
        se = statistics.stdev(self.diffs) / math.sqrt(self.n)
        return se, self.n - 1, f"paired t over {self.n} seeds{OWN_SETS if self.own_sets else ''}"

    @property
    def _needs_table(self) -> bool:
        """A test figure on test sentences the seeds share: its interval must count the
        test set's variance, which only the seeds x sentences table gives."""
        return bool(self.metric.sentences) and not self.own_sets

    def repeated(self, look: Look) -> Span | None:
        """The look's repeated confidence interval: the headline's statistic at the look's
        nominal level, centred on the same seeds as its standard error."""
        level = 1.0 - look.alpha
        where = f"repeated interval at look {look.index} of {look.of}"
        if (parts := self.parts()) is not None:
            method = f"{where}, {self._method(parts)}"
            return Span(parts.diff, *self._around(parts, level), level, method)
        if (found := self.standard_error()) is None:
            return None
        se, df, source = found
        diff = statistics.fmean(self.diffs)
        half = float(repeated_half_width(se, df, look))
        return Span(
            diff, diff - half, diff + half, level, f"{where}, standard error of the {source}"
        )


def _left_out(
    metric: Metric, arm: list[Run], base: list[Run], kept: tuple[tuple[Path, ...], ...] | None
) -> list[str]:
    """The shared seeds (a run in each arm) that the seeds x sentences table does not
    hold, each with why."""
    runs = {r.seed: r for r in arm}, {r.seed: r for r in base}
    held = set() if kept is None else {*kept[0]}
    out = []
    for seed in sorted(set(runs[0]) & set(runs[1])):
        if runs[0][seed].path in held:
            continue
        why = []
        for side, found in zip(("arm", "baseline"), (runs[0][seed], runs[1][seed]), strict=True):
            if metric.value(found) is None:
                why.append(f"no {metric.title} in the {side}'s results")
            elif found.test_outputs() is None:
                problem = found.outputs_problem()
                why.append(
                    f"the {side}'s {problem}" if problem else f"no test outputs in the {side}"
                )
        out.append(f"seed {seed}: {', '.join(why) or 'other test sentences'}")
    return out
