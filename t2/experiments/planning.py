"""How many seeds a sweep needs to tell a difference: the power plan of `t2 sweep --plan`.

The sweep file's `detect` key is the difference of test BLEU worth detecting (e.g. 0.5).
The seed-to-seed spread comes from the sweep's finished runs (the standard deviation of
test BLEU over seeds, pooled over arms), or from a pilot: the baseline arm's first two
seeds, which are runs of the sweep anyway. The plan is the fewest seeds per arm whose
two-sided t-test finds that difference with the rule's power at its level (80% and 5%
by default) (the noncentral t
distribution, t2.experiments.stats.seeds_needed), and what training them costs at the
finished runs' mean wall time. A sweep given fewer seeds is warned before it starts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from t2.experiments.compare import duration
from t2.experiments.report import collect
from t2.experiments.runs import Run
from t2.experiments.stats import POWER, SPREAD_LEVEL, sd, seeds_needed, spread_interval
from t2.experiments.sweepfile import Sweep


@dataclass(frozen=True)
class Plan:
    """The seeds per arm a sweep needs to detect `difference` BLEU at 80% power."""

    difference: float
    spread: float | None  # pooled standard deviation of test BLEU over seeds
    runs: int  # finished runs the spread comes from
    df: int  # its degrees of freedom: runs minus the arms they pool
    needed: int | None  # seeds per arm; None without a spread
    given: int  # seeds the sweep file gives
    arms: int
    run_seconds: float | None  # mean wall time of a finished run
    at_once: int = 1  # runs trained side by side (--jobs)
    power: float = POWER  # the decision rule's
    alpha: float = 0.05

    @property
    def enough(self) -> bool | None:
        return None if self.needed is None else self.given >= self.needed

    def text(self) -> str:
        head = (
            f"power plan: detect {self.difference:g} test BLEU at {self.power:.0%} power "
            f"({self.alpha:.0%} level)"
        )
        if self.needed is None:
            pilot = "t2 sweep FILE --plan trains a pilot (the baseline's first two seeds)"
            return f"{head}: no arm has two finished seeds to measure the seed spread; {pilot}"
        runs = self.needed * self.arms
        cost = (
            ""
            if self.run_seconds is None
            else (
                f", {duration(runs * self.run_seconds)} of training at "
                f"{duration(self.run_seconds)} a run"
            )
        )
        if cost and self.at_once > 1:
            rounds = -(-runs // self.at_once)
            cost += f", ~{duration(rounds * self.run_seconds)} {self.at_once} at a time"
        verdict = "enough" if self.enough else "too few to tell that difference"
        return (
            f"{head}: seed spread {self.spread:.2f} BLEU (sd over {self.runs} finished "
            f"runs, pooled over arms) -> {self.needed} seeds per arm ({runs}"
            f" runs{cost}); the sweep gives {self.given}: {verdict}. "
            f"{self.uncertainty()}"
        )

    def seeds(self, spread: float) -> int:
        """The seeds per arm that `spread` asks for, at the rule's power and level."""
        return seeds_needed(spread, self.difference, self.power, level=1.0 - self.alpha)

    def uncertainty(self) -> str:
        """How far the plan could move: the spread's interval on its degrees of freedom
        and the seeds its ends ask for (a pilot of two runs has one degree of freedom)."""
        low, high = spread_interval(self.spread, self.df)  # type: ignore[arg-type]
        few, many = (self.seeds(x) for x in (low, high))
        more = " (a wide range: plan again when more runs have finished)" if many > 2 * few else ""
        return (
            f"The spread is measured on {self.df} degree{'s' * (self.df > 1)} of freedom: "
            f"its {SPREAD_LEVEL:.0%} interval {low:.2f} to {high:.2f} BLEU asks {few} to "
            f"{many} seeds per arm{more}"
        )


def pooled_spread(runs: dict[str, list[Run]]) -> tuple[float | None, int, int]:
    """The standard deviation of test BLEU over seeds, pooled over the arms with two
    finished seeds or more (weighted by their degrees of freedom), the runs used and the
    degrees of freedom."""
    total, df, used = 0.0, 0, 0
    for arm_runs in runs.values():
        values = [v for r in arm_runs if (v := r.result("bleu")) is not None]
        if len(values) > 1:
            total += (len(values) - 1) * sd(values) ** 2
            df, used = df + len(values) - 1, used + len(values)
    return (math.sqrt(total / df), used, df) if df else (None, 0, 0)


def make_plan(sweep: Sweep, out: Path, at_once: int = 1) -> Plan:
    """The plan from the sweep's finished runs in `out` (sweep.detect must be set), its
    cost for `at_once` runs side by side."""
    runs, _ = collect(sweep, out)
    spread, used, df = pooled_spread(runs)
    rule = sweep.rule
    level = 1.0 - rule.alpha
    needed = None if spread is None else seeds_needed(spread, sweep.detect, rule.power, level=level)
    walls = [w for rs in runs.values() for r in rs if (w := r.final("elapsed_s")) is not None]
    seconds = sum(walls) / len(walls) if walls else None
    given, arms = len(sweep.seeds), len(sweep.arms)
    return Plan(
        sweep.detect,
        spread,
        used,
        df,
        needed,
        given,
        arms,
        seconds,
        at_once,
        rule.power,
        rule.alpha,
    )


def pilot_seeds(sweep: Sweep) -> tuple[int, int]:
    """The baseline's two pilot seeds: the sweep's first two (one more if it has one)."""
    first = sweep.seeds[0]
    return (first, sweep.seeds[1]) if len(sweep.seeds) > 1 else (first, first + 1)
