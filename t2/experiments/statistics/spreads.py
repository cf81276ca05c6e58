"""What a power plan measures from finished runs: the seed-to-seed spread of a figure
(of the per-seed differences to the baseline when arms share seeds, else of one arm's
seeds, pooled over arms) and, for a test figure whose runs kept their translations, the
test set's own sampling variance of the mean difference (the headline interval's
sentence-only part, t2.experiments.statistics.twoway), which more seeds do not reduce."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from t2.experiments.statistics.bootstrap import shared_outputs
from t2.experiments.statistics.twoway import seeds_and_sentences
from t2.experiments.statistics.welch import sd
from t2.experiments.sweeps.metrics import Metric, by_seed, runs_by_seed
from t2.experiments.sweeps.runs import Run


@dataclass(frozen=True)
class Spread:
    """A measured seed-to-seed standard deviation and what it was measured on."""

    value: float
    df: int
    runs: int
    paired: bool  # of the per-seed differences; else of one arm's seeds, pooled over arms

    def of_difference(self) -> float:
        """The spread of a per-seed difference it implies."""
        return self.value if self.paired else self.value * math.sqrt(2.0)

    def text(self) -> str:
        if self.paired:
            return (
                f"the per-seed differences to the baseline spread {self.value:.2f} (sd over "
                f"{self.runs} pairs, pooled over arms)"
            )
        return (
            f"seed spread {self.value:.2f} (sd over {self.runs} finished runs, pooled over "
            f"arms; no pairs yet: a difference taken to spread sqrt(2) times that)"
        )


def _pooled(groups: list[list[float]], paired: bool) -> Spread | None:
    groups = [g for g in groups if len(g) > 1]
    df = sum(len(g) - 1 for g in groups)
    if not df:
        return None
    variance = sum((len(g) - 1) * sd(g) ** 2 for g in groups) / df  # type: ignore[operator]
    return Spread(math.sqrt(variance), df, sum(len(g) for g in groups), paired)


def arm_spread(runs: dict[str, list[Run]], metric: Metric) -> Spread | None:
    """The sd of the metric over seeds, pooled over the arms with two seeds or more."""
    return _pooled([list(by_seed(rs, metric).values()) for rs in runs.values()], False)


def paired_spread(runs: dict[str, list[Run]], baseline: str, metric: Metric) -> Spread | None:
    """The sd of the per-seed differences to the baseline, pooled over the arms."""
    base = by_seed(runs.get(baseline, []), metric)
    groups = []
    for arm, rs in runs.items():
        values = by_seed(rs, metric)
        if arm != baseline:
            groups.append([values[s] - base[s] for s in sorted(set(values) & set(base))])
    return _pooled(groups, True)


def test_set_floor(runs: dict[str, list[Run]], baseline: str, metric: Metric) -> float | None:
    """The test set's own variance of the mean difference, which more seeds do not reduce:
    the sentence-only part of the headline's variance (t2.experiments.statistics.twoway), averaged
    over
    the arms; None without test outputs for two seeds."""
    found = []
    for arm, rs in runs.items():
        if arm == baseline or not metric.sentences:
            continue
        shared = shared_outputs(runs_by_seed(rs, metric), runs_by_seed(runs[baseline], metric))
        if shared is not None:
            found.append(seeds_and_sentences(*shared, metric.sentences).sentences)
    return float(np.mean(found)) if found else None
