"""What the intervals of a test figure read from its runs: each test sentence's sacreBLEU
sufficient statistics (corpus BLEU or chrF is a function of their sum), the runs of the
shared seeds that scored the same sentences, and scipy's BCa bootstrap of the mean of the
per-seed differences.

Until issue 52 this module also made the headline interval, a bootstrap over seeds and
sentences (BCa). Simulated against the true difference it covered 70.5% at 3 seeds when
the seeds dominate, and counted the seed x sentence interaction about three times when it
dominated (its variance is the plug-in rows / n + columns / m + interaction / nm, whose
seed part is shrunk by (n - 1) / n). The headline is now t2.experiments.statistics.twoway's.
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

from t2.data.references import seeded
from t2.experiments.sweeps.runs import Run, read_run
from t2.rundir import RunDir

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
    method: str  # e.g. "bootstrap over 15 seeds, BCa"

    def contains_zero(self) -> bool:
        return self.low <= 0.0 <= self.high


@lru_cache(maxsize=256)
def _stats(folder: str, written: tuple[int, ...], scorer: str) -> np.ndarray:
    """(sentences, statistics) of a run's test translations, cached by folder and stamp."""
    found = read_run(folder).test_outputs()  # the one reader of references: sweeps.runs
    if found is None:
        raise ValueError(f"{folder} has no test outputs")
    hyps, refs = found
    metric = SCORERS[scorer]()
    return np.asarray(metric._extract_corpus_statistics(hyps, [refs]), dtype=np.float64)


def sentence_stats(run: Path, scorer: str) -> np.ndarray:
    """sacreBLEU's sufficient statistics of each of a run's test sentences (it must have
    test outputs): the rows sum to the statistics of its corpus score."""
    return _stats(str(run), outputs_stamp(run), scorer)


def outputs_stamp(run: Path) -> tuple[int, ...]:
    """The times (ns) and sizes of a run's test translations, its meta.json (which names
    its references by SHA-256) and an older run's copy of them: a cache key that a
    rewritten or replaced file moves."""
    folder = RunDir(run)
    files = (folder.test_hyps, folder.meta, folder.test_refs)
    found = [f.stat() for f in files if f.is_file()]
    return tuple(x for st in found for x in (st.st_mtime_ns, st.st_size))


def corpus_score(scorer: str) -> Score:
    """sacreBLEU's corpus score (BLEU or chrF) from summed sentence statistics."""
    metric = SCORERS[scorer]()
    return lambda stats: float(metric._compute_score_from_stats(list(stats)).score)


def _interval(result: Any, diff: float, method: str) -> Interval | None:
    """scipy's BootstrapResult as an Interval; None where BCa could not be computed."""
    ci = result.confidence_interval
    if np.isnan(ci.low) or np.isnan(ci.high):  # a degenerate distribution: no BCa
        return None
    return Interval(diff, float(ci.low), float(ci.high), float(result.standard_error), method)


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


def own_test_sets(arm: Mapping[int, Run], base: Mapping[int, Run]) -> int | None:
    """The shared seeds, when each seed's two runs have test outputs on the same sentences
    of a generated task (`task:`, which draws its test set with the seed: independent
    sets) and no two seeds share them (so not for hand-picked files per seed), two
    seeds or more; else None. Each seed's difference then carries its own test set's
    noise, independent of the others', so their spread counts it."""
    refs = []
    shared = sorted(set(arm) & set(base))
    specs = {str(r.config.get("data.test", "")) for s in shared for r in (arm[s], base[s])}
    if not all(seeded(spec) for spec in specs):  # only a generated task draws its own
        return None
    for seed in shared:
        found = arm[seed].test_outputs(), base[seed].test_outputs()
        if found[0] is None or found[1] is None or found[0][1] != found[1][1]:
            return None
        refs.append(tuple(found[0][1]))
    return len(refs) if len(refs) >= 2 and len(set(refs)) == len(refs) else None
