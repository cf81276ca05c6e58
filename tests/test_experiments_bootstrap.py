"""t2.experiments.bootstrap: the seeds x sentences bootstrap counts both sources of noise
(its variance equals the two-way bootstrap's closed form, which resampling either alone
falls short of), scores resamples as sacreBLEU scores the same sentences, and its BCa over
seeds reproduces the referee's figure for report 004."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sacrebleu.metrics import BLEU

from t2.experiments.bootstrap import MeanDifference, corpus_score, over_seeds, seeds_and_sentences

ROOT = Path(__file__).resolve().parent.parent
RECORDS = ROOT / "docs" / "results" / "report004" / "records"


def _additive(m: int):
    """A side's score: the mean of its sentences' one statistic (weights sum to m)."""
    return lambda stats: float(stats[0]) / m


def test_the_variance_counts_seeds_and_sentences():
    """y = row (seed) + column (sentence) + noise, as arm minus baseline. The two-way
    bootstrap of the grand mean has variance s_r^2 / n + s_c^2 / m + s_e^2 / (n m)
    exactly (the centred row, column and interaction parts, divided by their counts);
    a bootstrap of seeds alone gives only the first, sentences drawn apart for each seed
    shrink the second n times."""
    rng = np.random.default_rng(3)
    n, m = 6, 40
    y = rng.normal(0, 0.5, (n, 1)) + rng.normal(0, 3.0, (1, m)) + rng.normal(0, 1.0, (n, m))
    arm, base = y[:, :, None] + 5.0, np.full((n, m, 1), 5.0)
    rows, cols = y.mean(1, keepdims=True) - y.mean(), y.mean(0, keepdims=True) - y.mean()
    inter = y - y.mean() - rows - cols
    want = (rows**2).mean() / n + (cols**2).mean() / m + (inter**2).mean() / (n * m)
    result, diff = seeds_and_sentences(arm, base, _additive(m), 0.95)
    assert diff == pytest.approx(y.mean())
    assert result.standard_error**2 == pytest.approx(want, rel=0.1)
    assert (rows**2).mean() / n < 0.3 * want  # seeds alone would miss most of it
    low, high = result.confidence_interval
    assert low < y.mean() < high and high - low == pytest.approx(3.92 * want**0.5, rel=0.15)


def test_a_resample_is_scored_as_sacrebleu_scores_its_sentences():
    refs = ["the cat sat on the mat", "a dog ran", "it is raining today", "we go home now"]
    base = ["the cat sat on a mat", "a dog ran off", "it rains today", "we go home"]
    arm = ["the cat sat on the mat", "the dog ran", "it is raining", "we go home now"]
    bleu = BLEU()
    stats = [np.asarray(bleu._extract_corpus_statistics(h, [refs]), float) for h in (arm, base)]
    score = corpus_score("bleu")
    assert score(stats[0].sum(0)) == pytest.approx(bleu.corpus_score(arm, [refs]).score)
    statistic = MeanDifference(np.stack([stats[0]] * 2), np.stack([stats[1]] * 2), score)
    picked = np.array([0, 0, 3, 1])  # sentence 0 twice, 3 and 1
    want = bleu.corpus_score([arm[i] for i in picked], [[refs[i] for i in picked]]).score
    want -= bleu.corpus_score([base[i] for i in picked], [[refs[i] for i in picked]]).score
    assert statistic(np.array([1, 1]), picked) == pytest.approx(want)


def test_bca_over_seeds_gives_the_referees_interval_for_report_004():
    """Issue 49: "BCa gives [+0.28, +1.29]" over report 004's 15 per-seed differences."""
    bleu = {
        (arm, s): json.loads((RECORDS / arm / f"seed-{s}" / "results.json").read_text())["bleu"]
        for arm in ("base", "v2")
        for s in range(1, 16)
    }
    diffs = [bleu["v2", s] - bleu["base", s] for s in range(1, 16)]
    found = over_seeds(diffs, 0.95)
    assert (round(found.low, 2), round(found.high, 2)) == (0.28, 1.29)
    assert found.method == "bootstrap over 15 seeds, BCa"
    assert over_seeds([1.0], 0.95) is None and over_seeds([0.5, 0.5], 0.95).low == 0.5
