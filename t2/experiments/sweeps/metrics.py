"""The figures a sweep compares its arms on, each read from a run's own files, and the
names a sweep file's decision rule picks one by (rule: {metric: test_bleu})."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from t2.experiments.sweeps.runs import Run


@dataclass(frozen=True)
class Metric:
    key: str
    title: str
    value: Callable[[Run], float | None]
    lower_is_better: bool
    digits: int
    sentences: str | None = None  # scored per test sentence by sacreBLEU's bleu or chrf


METRICS = [
    Metric("valid_loss", "validation loss", lambda r: r.last_valid("valid_loss"), True, 4),
    Metric("valid_bleu", "validation BLEU", lambda r: r.last_valid("valid_bleu"), False, 2),
    Metric("valid_chrf", "validation chrF", lambda r: r.last_valid("valid_chrf"), False, 2),
    Metric("test_bleu", "test BLEU", lambda r: r.result("bleu"), False, 2, "bleu"),
    Metric("test_chrf", "test chrF", lambda r: r.result("chrf"), False, 2, "chrf"),
]
BY_KEY = {m.key: m for m in METRICS}


def by_seed(runs: list[Run], metric: Metric) -> dict[int, float]:
    """seed -> the metric's value, for the runs that have it."""
    return {r.seed: v for r in runs if (v := metric.value(r)) is not None}


def runs_by_seed(runs: list[Run], metric: Metric) -> dict[int, Run]:
    """seed -> the run, for the runs that have the metric."""
    return {r.seed: r for r in runs if metric.value(r) is not None}
