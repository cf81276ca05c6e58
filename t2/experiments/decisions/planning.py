"""How many seeds a sweep needs under the rule in force: the power plan of `t2 sweep --plan`.

The rule's `detect` is the difference worth detecting, on the rule's metric, at its power
and level. The rules that read an interval over paired seeds (`interval`, `paired_t`) are
sized for a paired t-test (t2.experiments.statistics.welch.paired_power) on the spread of the
per-seed differences and, for a test figure, with the test set's sampling variance as a
floor that seeds do not reduce (t2.experiments.statistics.spreads); planned looks multiply the seeds
by the design's inflation (t2.experiments.statistics.sequential). `welch_pooled` and `same_sign` are
sized for Welch's two-sample test on one arm's seed spread; `same_sign` also needs every
seed to move the same way, a chance that falls as seeds are added
(t2.experiments.decisions.verdict.same_sign_power): the plan says so when no number of seeds gives
that rule its power. Spreads come from the finished runs, or from a pilot of the
baseline's first two seeds, runs of the sweep anyway. The spread's own uncertainty (its
chi-square interval on its degrees of freedom) is printed with the seeds its ends ask.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from t2.experiments.decisions.rule import Rule
from t2.experiments.decisions.verdict import same_sign_power
from t2.experiments.reports.compare import duration
from t2.experiments.reports.report import collect
from t2.experiments.statistics.sequential import inflation
from t2.experiments.statistics.spreads import Spread, arm_spread, paired_spread, test_set_floor
from t2.experiments.statistics.welch import SPREAD_LEVEL, seeds_needed, spread_interval
from t2.experiments.sweeps.metrics import BY_KEY
from t2.experiments.sweeps.sweepfile import Sweep

MOST = 1000  # seeds per arm beyond which a plan says "out of reach"


@dataclass(frozen=True)
class PowerPlan:
    """The seeds per arm the rule needs to detect its `detect` difference at its power."""

    rule: Rule
    spread: Spread | None  # what the rule is sized on (None: nothing measured yet)
    floor: float | None  # the test set's variance of the mean difference (paired rules)
    given: int  # seeds the sweep file gives
    arms: int
    run_seconds: float | None  # mean wall time of a finished run
    at_once: int = 1  # runs trained side by side (--jobs)
    pairs: Spread | None = None  # same_sign: the per-seed differences' spread, if measured

    @property
    def paired(self) -> bool:
        return self.rule.decide in ("interval", "paired_t")

    def seeds(self, spread: float) -> int:
        """Seeds per arm for a single look at `spread`; MOST + 1 when out of reach."""
        rule, level = self.rule, 1.0 - self.rule.alpha
        if not self.paired:
            return seeds_needed(spread, rule.detect, rule.power, MOST, level)  # type: ignore[arg-type]
        assert self.spread is not None
        d = spread if self.spread.paired else spread * math.sqrt(2.0)
        return seeds_needed(d, rule.detect, rule.power, MOST, level, True, self.floor or 0.0)  # type: ignore[arg-type]

    @property
    def needed(self) -> int | None:
        """Seeds per arm, planned looks included; None without a spread, MOST + 1 beyond
        reach."""
        if self.spread is None:
            return None
        single = self.seeds(self.spread.value)
        if single > MOST or not self.rule.looks:
            return single
        return math.ceil(single * inflation(self.rule.looks, self.rule.alpha, self.rule.power))

    @property
    def enough(self) -> bool | None:
        return None if self.needed is None else self.given >= self.needed

    def _head(self) -> str:
        title = BY_KEY[self.rule.metric].title
        return (
            f"power plan (`{self.rule.decide}` on {title}): detect {self.rule.detect:g} at "
            f"{self.rule.power:.0%} power ({self.rule.alpha:.0%} level)"
        )

    def _cost(self, needed: int) -> str:
        runs = needed * self.arms
        if self.run_seconds is None:
            return f"{runs} runs"
        each = self.run_seconds
        cost = f"{runs} runs, {duration(runs * each)} of training at {duration(each)} a run"
        if self.at_once > 1:
            rounds = -(-runs // self.at_once)
            cost += f", ~{duration(rounds * each)} {self.at_once} at a time"
        return cost

    def text(self) -> str:
        if self.spread is None:
            pilot = "t2 sweep FILE --plan trains a pilot (the baseline's first two seeds)"
            return (
                f"{self._head()}: no arm has two finished seeds to measure the seed spread; {pilot}"
            )
        needed = self.needed
        assert needed is not None
        floor = ""
        if self.floor is not None and self.paired:
            floor = (
                f", and the test set adds {math.sqrt(self.floor):.2f} to the standard error of "
                f"the mean difference, which more seeds do not reduce"
            )
        if needed > MOST:
            reach = f"out of reach (more than {MOST} seeds per arm)"
            return f"{self._head()}: {self.spread.text()}{floor}: {reach}. {self.sign_text()}"
        looks = ""
        if self.rule.looks:
            factor = needed / self.seeds(self.spread.value)
            looks = f" with its {len(self.rule.looks)} planned looks (inflation {factor:.3f})"
        verdict = "enough" if self.enough else "too few to tell that difference"
        return (
            f"{self._head()}: {self.spread.text()}{floor} -> {needed} seeds per arm{looks} "
            f"({self._cost(needed)}); the sweep gives {self.given}: {verdict}. "
            f"{self.sign_text()}{self.uncertainty()}"
        )

    def sign_text(self) -> str:
        """same_sign's ceiling: every seed moving the way of a true `detect`."""
        if self.rule.decide != "same_sign" or self.spread is None:
            return ""
        d = (self.pairs or self.spread).of_difference()
        detect, needed = self.rule.detect, self.needed
        at_given = same_sign_power(detect, d, self.given)  # type: ignore[arg-type]
        text = (
            f"same_sign also needs every seed to move the same way: with per-seed "
            f"differences spread {d:.2f}, a true difference of {detect:g} gives that with "
            f"probability at most {at_given:.2g} at the sweep's {self.given} seeds, and less "
            f"with more seeds"
        )
        if needed is not None and same_sign_power(detect, d, needed) < self.rule.power:  # type: ignore[arg-type]
            text += (
                f"; at the {needed} its interval needs, at most "
                f"{same_sign_power(detect, d, needed):.2g}: no number of seeds gives same_sign "  # type: ignore[arg-type]
                f"{self.rule.power:.0%} power"
            )
        return text + ". "

    def uncertainty(self) -> str:
        """How far the plan could move: the spread's interval on its degrees of freedom
        and the seeds its ends ask for (a pilot of two runs has one degree of freedom)."""
        assert self.spread is not None
        low, high = spread_interval(self.spread.value, self.spread.df)
        few, many = (self.seeds(x) for x in (low, high))
        more = " (a wide range: plan again when more runs have finished)" if many > 2 * few else ""
        df = self.spread.df
        return (
            f"The spread is measured on {df} degree{'s' * (df > 1)} of freedom: its "
            f"{SPREAD_LEVEL:.0%} interval {low:.2f} to {high:.2f} asks {few} to {many} seeds "
            f"per arm for a single look{more}"
        )


def make_plan(sweep: Sweep, out: Path, at_once: int = 1) -> PowerPlan:
    """The plan for the sweep file's rule (its `detect` must be set) from the finished
    runs in `out`, its cost for `at_once` runs side by side."""
    runs, _ = collect(sweep, out)
    rule, metric = sweep.rule, BY_KEY[sweep.rule.metric]
    spread, floor = arm_spread(runs, metric), None
    if rule.decide in ("interval", "paired_t"):
        spread = paired_spread(runs, sweep.baseline, metric) or spread
        floor = test_set_floor(runs, sweep.baseline, metric) if spread and spread.paired else None
    pairs = paired_spread(runs, sweep.baseline, metric) if rule.decide == "same_sign" else None
    walls = [w for rs in runs.values() for r in rs if (w := r.final("elapsed_s")) is not None]
    seconds = sum(walls) / len(walls) if walls else None
    given, arms = len(sweep.seeds), len(sweep.arms)
    return PowerPlan(rule, spread, floor, given, arms, seconds, at_once, pairs)


def pilot_seeds(sweep: Sweep) -> tuple[int, int]:
    """The baseline's two pilot seeds: the sweep's first two (one more if it has one)."""
    first = sweep.seeds[0]
    return (first, sweep.seeds[1]) if len(sweep.seeds) > 1 else (first, first + 1)
