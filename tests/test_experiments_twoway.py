"""t2.experiments.twoway, the headline interval of a test figure: simulated against the
true difference it covers 93-97.5% at 3, 5 and 15 seeds whether the seeds or their
interaction with the sentences dominate, its equivalence reading errs at most alpha at
the margin, planned looks on it keep their level (a small seeded grid of
benchmarks/interval_coverage.py, which runs the full one); its sentence contributions
give the variance that a bootstrap of sacreBLEU's scores over the sentences gives; on the
committed dyt_pre records it is no narrower than the paired t."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from benchmarks import interval_coverage as sim
from t2.experiments import spreads
from t2.experiments.bootstrap import corpus_score, sentence_stats
from t2.experiments.evidence import Evidence
from t2.experiments.metrics import BY_KEY
from t2.experiments.runs import read_run
from t2.experiments.twoway import contributions, decompose, mean_squares

RECORDS = Path(__file__).resolve().parent.parent / "docs" / "results" / "dyt_pre" / "records"
SETS = 6_000  # a coverage near 95% has a Monte Carlo standard error of 0.3% here
SIDES = ("dyt", "layernorm")
GRID = [(name, n) for name in ("seeds dominate", "interaction dominates") for n in (3, 5, 15)]
LOOKED = ("seeds alone", "seeds dominate", "as report 004")


@pytest.mark.parametrize("scenario, n", GRID)
def test_the_headline_covers_the_true_difference(scenario, n):
    parts = sim.SCENARIOS[scenario]
    found = sim.coverage(sim.two_way, parts, n, SETS, seed=n)
    assert 0.93 <= found <= 0.975, f"{scenario}, {n} seeds: {found:.3f}"


def test_the_old_bootstrap_fails_the_same_grid():
    """The grid can fail: the seeds x sentences bootstrap's variance misses at 3 seeds when
    the seeds dominate and counts the interaction thrice when it dominates."""
    old = sim.bootstrap_old
    assert sim.coverage(old, sim.SCENARIOS["seeds dominate"], 3, SETS, seed=3) < 0.85
    assert sim.coverage(old, sim.SCENARIOS["interaction dominates"], 3, SETS, seed=3) > 0.99


@pytest.mark.parametrize("scenario", ["seeds dominate", "interaction dominates"])
def test_equivalence_at_the_margin_errs_at_most_alpha(scenario):
    """A true difference of exactly `detect`: "equivalent" or "better by less than d" at
    most 5% of the time (plus three Monte Carlo standard errors), at 3 seeds."""
    found = sim.margin_error(sim.two_way, sim.SCENARIOS[scenario], 3, SETS, seed=11)
    assert found <= 0.05 + 3 * (0.05 * 0.95 / SETS) ** 0.5
    assert sim.margin_error(sim.bootstrap_old, sim.SCENARIOS["seeds dominate"], 3, SETS, 11) > 0.08


@pytest.mark.parametrize("plan", sim.PLANS)
def test_planned_looks_keep_their_level(plan):
    """No true difference, 6,000 simulated sweeps of whole seeds x sentences tables: the
    repeated intervals on the headline's standard error cross at some look at most 5.5%
    of the time (the benchmark's 50,000 say how far under)."""
    for scenario in LOOKED:
        found = sim.crossing(sim.two_way, sim.SCENARIOS[scenario], plan, 6_000, seed=5)
        assert found <= 0.055, f"{plan}, {scenario}: {found:.4f}"


def test_looks_on_the_old_bootstrap_error_cross_too_often():
    """The same sweeps, read with the old bootstrap's standard error (seed part shrunk by
    (n - 1) / n) and t(n - 1): over 5.5% at looks 2 and 4 (issue 52: 7.35% with BCa's)."""
    found = sim.crossing(sim.bootstrap_old, sim.SCENARIOS["seeds alone"], (2, 4), 6_000, seed=5)
    assert found > 0.055


def test_the_parts_are_the_two_way_variance_of_a_mean():
    """d = row + column + noise: the parts estimate s_r^2 / n and s_c^2 / m, and their sum
    the variance of the grand mean over fresh tables (rows and columns drawn again)."""
    rng = np.random.default_rng(4)
    n, m, reps = 4, 30, 20_000
    d = (
        rng.normal(0, 1.0, (reps, n, 1))
        + rng.normal(0, 2.0, (reps, 1, m))
        + rng.normal(0, 1.5, (reps, n, m))
    )
    parts = decompose(d)
    assert parts.seeds.mean() == pytest.approx((1.0 + 1.5**2 / m) / n, rel=0.03)
    assert parts.sentences.mean() == pytest.approx(2.0**2 / m, rel=0.03)
    truth = d.mean(axis=(1, 2)).var()
    assert (parts.seeds + parts.sentences).mean() == pytest.approx(truth, rel=0.03)
    assert np.all(parts.df == n - 1)
    _, rows, _, _ = mean_squares(d[:1])  # s^2 / n of the per-seed means is the seed part
    assert rows[0] / (n * m) == pytest.approx(d[0].mean(axis=1).var(ddof=1) / n)


def test_sentence_contributions_vary_as_a_bootstrap_of_sacrebleus_scores():
    """On dyt_pre's 3 seeds x 1014 sentences (test BLEU, dyt - layernorm), the jackknife
    contributions' variance of the mean over sentences, (n m)^-1 MS_sentences (m - 1) / m,
    is what a bootstrap of the test sentences gives, every seed kept and each resample
    scored by sacreBLEU from its summed statistics."""
    score = corpus_score("bleu")
    arm, base = (
        np.stack([sentence_stats(RECORDS / side / f"seed-{s}", "bleu") for s in (1, 2, 3)])
        for side in ("dyt", "layernorm")
    )
    n, m = arm.shape[:2]
    d = contributions(arm, base, score)
    whole = [score(arm[i].sum(0)) - score(base[i].sum(0)) for i in range(n)]
    assert d.mean(axis=1) == pytest.approx(whole)
    _, _, ms_cols, _ = mean_squares(d)
    closed = ms_cols * (m - 1) / (n * m * m)
    rng = np.random.default_rng(0)
    drawn = []
    for _ in range(400):
        w = np.bincount(rng.integers(0, m, m), minlength=m)
        drawn.append(np.mean([score(w @ arm[i]) - score(w @ base[i]) for i in range(n)]))
    assert closed == pytest.approx(np.var(drawn, ddof=1), rel=0.2)


def test_on_dyt_pre_the_headline_is_no_narrower_than_the_paired_t():
    """Issue 52: the bootstrap gave [-12.16, -6.46] on dyt_pre's test BLEU, 2.7 times
    narrower than the paired t's [-16.28, -1.35] (scipy.stats.ttest_rel), which counts the
    seeds alone. t(2) sqrt(s^2 / 3 + the sentence-only variance) is a little wider."""
    arm = [read_run(RECORDS / "dyt" / f"seed-{s}") for s in (1, 2, 3)]
    base = [read_run(RECORDS / "layernorm" / f"seed-{s}") for s in (1, 2, 3)]
    headline = Evidence(BY_KEY["test_bleu"], arm, base).headline(0.95)
    paired = scipy.stats.ttest_rel(
        [r.result("bleu") for r in arm], [r.result("bleu") for r in base]
    )
    ci = paired.confidence_interval(0.95)
    width = headline.high - headline.low
    assert ci.high - ci.low <= width <= 1.05 * (ci.high - ci.low)
    assert headline.diff == pytest.approx((ci.low + ci.high) / 2)


def test_the_power_plans_floor_is_the_headlines_sentence_part():
    """What more seeds cannot remove, in the plan, is the variance the headline counts
    for the test set: on dyt_pre, 0.26^2 BLEU^2 (sd 0.26 against the seeds' 1.7)."""
    runs = {s: [read_run(RECORDS / s / f"seed-{i}") for i in (1, 2, 3)] for s in SIDES}
    parts = Evidence(BY_KEY["test_bleu"], runs["dyt"], runs["layernorm"]).parts()
    assert spreads.test_set_floor(runs, "layernorm", BY_KEY["test_bleu"]) == parts.sentences
    assert parts.sentences**0.5 == pytest.approx(0.26, abs=0.01)
    assert parts.seeds**0.5 == pytest.approx(1.73, abs=0.01)
