"""The headline interval of a test figure: a bootstrap over both sources of noise, the
seeds and the test sentences.

A seed's two runs score the same test sentences, and every seed scores the same test set.
Two things could come out otherwise: other seeds (training's own randomness: data order,
initial draws, dropout) and other sentences (the test set is a sample). A paired interval
over seeds counts the first only; sacreBLEU's paired tests within one seed count the
second only. Here each resample draws the seeds with replacement and, independently, the
test sentences with replacement, and scores every drawn seed's two runs on the drawn
sentences: corpus BLEU (or chrF) from the sentences' sufficient statistics, as sacreBLEU's
own paired bootstrap does. The statistic is the mean over the drawn seeds of the arm's
score minus the baseline's. The sentences are drawn once a resample for all seeds,
because all seeds share the test set: its sampling noise is common to them and does not
average away over seeds (drawing it again for each seed would shrink it by the number of
seeds). It is scipy.stats.bootstrap with the two index sets as two independent samples,
so its BCa interval (Efron & Tibshirani 1993, ch. 14) takes its acceleration from the
jackknife over seeds and over sentences, as scipy does for several samples.

Figures without sentence outputs (validation loss, BLEU and chrF) are bootstrapped over
seeds alone (scipy's BCa of the mean of the per-seed differences).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import scipy.stats
from sacrebleu.metrics import BLEU, CHRF

from t2.experiments.runs import Run
from t2.rundir import RunDir
from t2.rundir.layout import read_written_lines

RESAMPLES = 2000  # the bootstrap's resamples
SEED = 0  # its draws: fixed, so a report is the same every time
SCORERS = {"bleu": BLEU, "chrf": CHRF}  # a metric's `sentences` -> sacreBLEU's metric
Score = Callable[[np.ndarray], float]  # a side's score from its summed sentence statistics


@dataclass(frozen=True)
class Interval:
    """A bootstrap interval of the mean difference, with how it was made."""

    diff: float
    low: float
    high: float
    standard_error: float
    method: str  # e.g. "bootstrap over 15 seeds x 1014 sentences, BCa"

    def contains_zero(self) -> bool:
        return self.low <= 0.0 <= self.high


@lru_cache(maxsize=256)
def _stats(folder: str, written: int, scorer: str) -> np.ndarray:
    """(sentences, statistics) of a run's test translations, cached by folder and time."""
    run = RunDir(folder)
    hyps, refs = read_written_lines(run.test_hyps), read_written_lines(run.test_refs)
    metric = SCORERS[scorer]()
    return np.asarray(metric._extract_corpus_statistics(hyps, [refs]), dtype=np.float64)


def sentence_stats(run: Path, scorer: str) -> np.ndarray:
    """sacreBLEU's sufficient statistics of each of a run's test sentences (it must have
    test outputs): the rows sum to the statistics of its corpus score."""
    written = RunDir(run).test_hyps.stat().st_mtime_ns
    return _stats(str(run), written, scorer)


class MeanDifference:
    """The statistic: mean over the drawn seeds of score(arm) - score(baseline) on the
    drawn sentences (index arrays into the seeds and the sentences)."""

    def __init__(self, arm: np.ndarray, base: np.ndarray, score: Score) -> None:
        self.arm, self.base, self.score = arm, base, score  # (seeds, sentences, statistics)

    def __call__(self, seeds: np.ndarray, sentences: np.ndarray) -> float:
        weights = np.bincount(sentences.astype(int), minlength=self.arm.shape[1])
        drawn, times = np.unique(seeds.astype(int), return_counts=True)
        diffs = [
            self.score(weights @ self.arm[s]) - self.score(weights @ self.base[s]) for s in drawn
        ]
        return float(np.dot(diffs, times) / times.sum())


def corpus_score(scorer: str) -> Score:
    """sacreBLEU's corpus score (BLEU or chrF) from summed sentence statistics."""
    metric = SCORERS[scorer]()
    return lambda stats: float(metric._compute_score_from_stats(list(stats)).score)


def seeds_and_sentences(
    arm: np.ndarray, base: np.ndarray, score: Score, level: float
) -> tuple[Any, float]:
    """scipy's BCa bootstrap result and the statistic itself, for (seeds, sentences,
    statistics) arrays of the two sides and `score` of a side's summed statistics."""
    statistic = MeanDifference(arm, base, score)
    seeds, sentences = np.arange(arm.shape[0]), np.arange(arm.shape[1])
    result = scipy.stats.bootstrap(
        (seeds, sentences),
        statistic,
        vectorized=False,
        paired=False,
        confidence_level=level,
        n_resamples=RESAMPLES,
        method="BCa",
        rng=np.random.default_rng(SEED),
    )
    return result, statistic(seeds, sentences)


def _interval(result: Any, diff: float, method: str) -> Interval | None:
    """scipy's BootstrapResult as an Interval; None where BCa could not be computed."""
    ci = result.confidence_interval
    if np.isnan(ci.low) or np.isnan(ci.high):  # a degenerate distribution: no BCa
        return None
    return Interval(diff, float(ci.low), float(ci.high), float(result.standard_error), method)


@lru_cache(maxsize=64)
def two_level(
    arm: tuple[Path, ...], base: tuple[Path, ...], scorer: str, level: float
) -> Interval | None:
    """The seeds x sentences bootstrap (BCa) of the mean difference of `scorer` between
    the runs `arm` and `base`, seed by seed (the same test sentences in every run; see
    `shared_outputs`); None for fewer than two seeds."""
    if len(arm) < 2:
        return None
    a = np.stack([sentence_stats(p, scorer) for p in arm])
    b = np.stack([sentence_stats(p, scorer) for p in base])
    result, diff = seeds_and_sentences(a, b, corpus_score(scorer), level)
    method = f"bootstrap over {len(arm)} seeds x {a.shape[1]} sentences, BCa"
    return _interval(result, diff, method)


def over_seeds(diffs: list[float], level: float) -> Interval | None:
    """scipy's BCa bootstrap of the mean of the per-seed differences; None for fewer than
    two, a point when they do not vary."""
    if len(diffs) < 2:
        return None
    mean = float(np.mean(diffs))
    if max(diffs) == min(diffs):
        return Interval(mean, mean, mean, 0.0, f"{len(diffs)} equal differences")
    result = scipy.stats.bootstrap(
        (np.asarray(diffs),),
        np.mean,
        confidence_level=level,
        n_resamples=RESAMPLES * 5,
        method="BCa",
        rng=np.random.default_rng(SEED),
    )
    return _interval(result, mean, f"bootstrap over {len(diffs)} seeds, BCa")


def shared_outputs(
    arm: Mapping[int, Run], base: Mapping[int, Run]
) -> tuple[tuple[Path, ...], tuple[Path, ...]] | None:
    """The run folders of the shared seeds whose two runs have test outputs, arm's and
    baseline's in seed order; None unless two seeds or more, all on the same sentences."""
    arms, bases, refs = [], [], set()
    for seed in sorted(set(arm) & set(base)):
        found = arm[seed].test_outputs(), base[seed].test_outputs()
        if found[0] is None or found[1] is None or found[0][1] != found[1][1]:
            continue
        refs.add(tuple(found[0][1]))
        arms.append(arm[seed].path)
        bases.append(base[seed].path)
    if len(arms) < 2 or len(refs) != 1:
        return None
    return tuple(arms), tuple(bases)
