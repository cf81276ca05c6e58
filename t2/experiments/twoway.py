"""The headline interval of a test figure: Student's t over seeds and sentences, with the
variance of the mean difference split into its seed and sentence parts (issue 52).

Two things could come out otherwise: other seeds (training's own randomness) and other
test sentences (the test set is a sample from a population of sentences). The difference
it covers is the expected difference over both: over seeds and over test sets drawn like
this one. A paired t over seeds covers the difference on this test set only.

Each seed's difference is split into its sentences' contributions d_ij (seed i, sentence j):
corpus BLEU and chrF are not means over sentences, so d_ij is the jackknife's pseudo-value
of sentence j (m D_i - (m - 1) D_i without j, for each side), centred so that seed i's
contributions average to its corpus difference D_i. The n x m table is the two-way random
effects model d_ij = delta + u_i + v_j + w_ij: u the seed's effect on the difference, v the
sentence's (the arm gaining more on some sentences; shared by every seed, because every
seed scores the same test set), w their interaction and the sentence-level noise. Then

    Var(mean) = s_u^2 / n + s_v^2 / m + s_w^2 / (n m)
              = (MS_seeds + MS_sentences - MS_interaction) / (n m),

unbiased from the table's mean squares (Cornfield & Tukey 1956). MS_seeds / (n m) is
s^2 / n of the per-seed corpus differences, the paired t's own variance, which already
holds the interaction; (MS_sentences - MS_interaction) / (n m) is the sentence-only part,
s_v^2 / m, set to 0 when negative, which no number of seeds reduces. The interval is the
mean plus or minus Student's t quantile on n - 1 degrees of freedom times the square root
of their sum: t(n - 1) sqrt(s^2 / n + s_v^2 / m). It is never narrower than the paired t
interval. Satterthwaite's degrees of freedom, which the sentence part's many would raise,
trust a seed variance measured on n - 1 of them: at 3 seeds that interval covered 91%, and
interim looks at 2 and 4 seeds crossed 10% of the time under no difference. Chosen by
simulation over the alternatives (benchmarks/interval_coverage.py; docs/experiments.md):
the seeds x sentences BCa bootstrap it replaces covered 70% at 3 seeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import scipy.stats

from t2.experiments.bootstrap import Score, corpus_score, sentence_stats


@dataclass(frozen=True)
class Parts:
    """The mean difference and its variance's parts; floats, or arrays over data sets."""

    diff: Any
    seeds: Any  # s^2 / n: the per-seed corpus differences' variance of their mean
    sentences: Any  # s_v^2 / m: the test set's own part, shared by every seed (>= 0)
    df: int  # n - 1: the seeds' (the sentence part's many are not counted on; see above)

    @property
    def standard_error(self) -> Any:
        return np.sqrt(self.seeds + self.sentences)

    def half_width(self, level: float) -> Any:
        """Half the width of the `level` interval: t quantile times the standard error."""
        return scipy.stats.t.ppf(0.5 + level / 2.0, self.df) * self.standard_error


def mean_squares(d: np.ndarray) -> tuple[Any, Any, Any, Any]:
    """The grand mean and the seeds', sentences' and interaction's mean squares of `d`,
    (..., seeds, sentences) contributions (vectorised over leading axes)."""
    n, m = d.shape[-2:]
    grand = d.mean(axis=(-2, -1))
    rows, cols = d.mean(axis=-1), d.mean(axis=-2)  # (..., n), (..., m)
    ss_rows = m * ((rows - grand[..., None]) ** 2).sum(axis=-1)
    ss_cols = n * ((cols - grand[..., None]) ** 2).sum(axis=-1)
    ss_all = ((d - grand[..., None, None]) ** 2).sum(axis=(-2, -1))
    free = max(m - 1, 1)  # one sentence: no sentence or interaction variance to see
    ms_int = np.maximum(ss_all - ss_rows - ss_cols, 0.0) / ((n - 1) * free)
    return grand, ss_rows / (n - 1), ss_cols / free, ms_int


def parts_of(n: int, m: int, grand: Any, ms_rows: Any, ms_cols: Any, ms_int: Any) -> Parts:
    """The parts of the mean of an n x m table from its grand mean and mean squares."""
    sentences = np.maximum(ms_cols - ms_int, 0.0) / (n * m)
    return Parts(grand, ms_rows / (n * m), sentences, n - 1)


def decompose(d: np.ndarray) -> Parts:
    """The parts of the mean of `d`, (..., seeds, sentences) contributions, two seeds or
    more, from the two-way random-effects mean squares."""
    n, m = d.shape[-2:]
    return parts_of(n, m, *mean_squares(d))


def contributions(arm: np.ndarray, base: np.ndarray, score: Score) -> np.ndarray:
    """(seeds, sentences) contributions to each seed's corpus difference: for (seeds,
    sentences, statistics) arrays, the jackknife pseudo-values over sentences of
    score(arm) - score(base), centred on the seed's corpus difference."""
    m = arm.shape[1]
    out = np.empty(arm.shape[:2])
    for i in range(arm.shape[0]):
        sides = []
        for side in (arm[i], base[i]):
            total = side.sum(axis=0)
            whole = score(total)
            pseudo = m * whole - (m - 1) * np.array([score(total - row) for row in side])
            sides.append(pseudo - pseudo.mean() + whole)
        out[i] = sides[0] - sides[1]
    return out


@lru_cache(maxsize=64)
def seeds_and_sentences(arm: tuple[Path, ...], base: tuple[Path, ...], scorer: str) -> Parts:
    """The parts of the mean difference of `scorer` between the runs `arm` and `base`, seed
    by seed, two seeds or more on the same test sentences (bootstrap.shared_outputs)."""
    a = np.stack([sentence_stats(p, scorer) for p in arm])
    b = np.stack([sentence_stats(p, scorer) for p in base])
    found = decompose(contributions(a, b, corpus_score(scorer)))
    return Parts(*(float(x) for x in (found.diff, found.seeds, found.sentences)), found.df)
