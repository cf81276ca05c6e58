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
s_v^2 / m, set to 0 when negative, which no number of seeds reduces.

The two parts are estimated on very different degrees of freedom: s^2 on n - 1, the
sentence part on about m - 1 (m in the hundreds or thousands). The interval gives each its
own quantile (Banerjee 1960): the mean plus or minus

    sqrt((t(n - 1) s / sqrt(n))^2 + (z s_v / sqrt(m))^2),

t on n - 1 degrees of freedom and z the normal quantile at the same level. It is never
narrower than the paired t interval. Chosen by simulation (benchmarks/interval_coverage.py;
docs/experiments.md): t(n - 1) on the whole standard error covered up to 99.4% at 3 seeds
when the sentence part is a tenth of the seeds' (its quantile multiplies a part that is
known almost exactly); Satterthwaite's degrees of freedom for the sum, which trust a seed
variance measured on n - 1 of them, covered 91.6% at 3 seeds and let looks at 2 and 4
seeds cross 11% of the time; the seeds x sentences BCa bootstrap before issue 52 covered
70% at 3 seeds. A planned look reads the same interval at its nominal level.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import scipy.stats

from t2.experiments.statistics.bootstrap import Score, corpus_score, outputs_stamp, sentence_stats


@dataclass(frozen=True)
class Parts:
    """The mean difference and its variance's parts; floats, or arrays over data sets."""

    diff: Any
    seeds: Any  # s^2 / n: the per-seed corpus differences' variance of their mean
    sentences: Any  # s_v^2 / m: the test set's own part, shared by every seed (>= 0)
    df: int  # n - 1: the seed part's (the sentence part's are many: its quantile is z)

    @property
    def standard_error(self) -> Any:
        return np.sqrt(self.seeds + self.sentences)

    def half_width(self, level: float) -> Any:
        """Half the width of the `level` interval: each part times its own quantile, t on
        the seeds' degrees of freedom and the normal's on the sentences', in quadrature."""
        t = scipy.stats.t.ppf(0.5 + level / 2.0, self.df)
        z = scipy.stats.norm.ppf(0.5 + level / 2.0)
        return np.sqrt(t * t * self.seeds + z * z * self.sentences)


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


def seeds_and_sentences(arm: tuple[Path, ...], base: tuple[Path, ...], scorer: str) -> Parts:
    """The parts of the mean difference of `scorer` between the runs `arm` and `base`, seed
    by seed, two seeds or more on the same test sentences (bootstrap.shared_outputs);
    cached by the runs' folders and their test outputs' times and sizes."""
    stamps = tuple(outputs_stamp(p) for p in (*arm, *base))
    return _seeds_and_sentences(arm, base, scorer, stamps)


@lru_cache(maxsize=64)
def _seeds_and_sentences(
    arm: tuple[Path, ...], base: tuple[Path, ...], scorer: str, stamps: tuple[Any, ...]
) -> Parts:
    a = np.stack([sentence_stats(p, scorer) for p in arm])
    b = np.stack([sentence_stats(p, scorer) for p in base])
    found = decompose(contributions(a, b, corpus_score(scorer)))
    return Parts(*(float(x) for x in (found.diff, found.seeds, found.sentences)), found.df)
