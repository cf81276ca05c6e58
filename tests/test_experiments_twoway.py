"""t2.experiments.statistics.twoway, the headline interval of a test figure: simulated against the
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
from t2.experiments.statistics import spreads
from t2.experiments.statistics.bootstrap import corpus_score, sentence_stats
from t2.experiments.statistics.evidence import Evidence
from t2.experiments.statistics.twoway import contributions, decompose, mean_squares
from t2.experiments.sweeps.metrics import BY_KEY
from t2.experiments.sweeps.runs import read_run
from t2.rundir import RunDir

RECORDS = Path(__file__).resolve().parent.parent / "docs" / "results" / "dyt_pre" / "records"
# the records name their test set (files:../shared/data/multi30k/val) by SHA-256, no copy
TEST_SET = Path(__file__).resolve().parent.parent.parent / "shared/data/multi30k/val.en"
needs_test_set = pytest.mark.skipif(
    not TEST_SET.is_file(), reason=f"the records' test set {TEST_SET} is not here"
)
SETS = 6_000  # a coverage near 95% has a Monte Carlo standard error of 0.3% here
SIDES = ("dyt", "layernorm")
COVERED = (
    "seeds dominate",
    "seeds, sentences 0.3",
    "report 004, sentences 0.3",
    "interaction dominates",
    "interaction, sentences 0.3",
    "test set dominates",
)
GRID = [(name, n) for name in COVERED for n in (3, 5, 15)]
LOOKED = ("seeds alone", "seeds dominate", "as report 004", "seeds, sentences 0.3")


@pytest.mark.parametrize("scenario, n", GRID)
def test_the_headline_covers_the_true_difference(scenario, n):
    parts = sim.SCENARIOS[scenario]
    found = sim.coverage(sim.two_way, parts, n, SETS, seed=n)
    assert 0.93 <= found <= 0.975, f"{scenario}, {n} seeds: {found:.3f}"


def test_t_on_the_whole_standard_error_fails_the_same_grid():
    """t(n - 1) times the whole standard error (t2's until the review) over-covers once the
    sentence part is a tenth of the seeds' or more: its quantile multiplies a part that is
    known almost exactly."""
    for scenario in ("seeds, sentences 0.3", "interaction, sentences 0.3"):
        assert sim.coverage(sim.two_way_t, sim.SCENARIOS[scenario], 3, SETS, seed=3) > 0.975


def test_the_old_bootstrap_fails_the_same_grid():
    """The grid can fail: the seeds x sentences bootstrap's variance misses at 3 seeds when
    the seeds dominate and counts the interaction thrice when it dominates."""
    old = sim.bootstrap_old
    assert sim.coverage(old, sim.SCENARIOS["seeds dominate"], 3, SETS, seed=3) < 0.85
    assert sim.coverage(old, sim.SCENARIOS["interaction dominates"], 3, SETS, seed=3) > 0.99


@pytest.mark.parametrize("scenario", ["seeds dominate", "interaction dominates", "all three equal"])
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


@needs_test_set
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


@needs_test_set
def test_on_dyt_pre_the_headline_is_no_narrower_than_the_paired_t():
    """Issue 52: the bootstrap gave [-12.16, -6.46] on dyt_pre's test BLEU, 2.7 times
    narrower than the paired t's [-16.28, -1.35] (scipy.stats.ttest_rel), which counts the
    seeds alone. sqrt((t(2) s)^2 / 3 + z^2 the sentence-only variance) is a little wider."""
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


@needs_test_set
def test_the_power_plans_floor_is_the_headlines_sentence_part():
    """What more seeds cannot remove, in the plan, is the variance the headline counts
    for the test set: on dyt_pre, 0.26^2 BLEU^2 (sd 0.26 against the seeds' 1.7)."""
    runs = {s: [read_run(RECORDS / s / f"seed-{i}") for i in (1, 2, 3)] for s in SIDES}
    parts = Evidence(BY_KEY["test_bleu"], runs["dyt"], runs["layernorm"]).parts()
    assert spreads.test_set_floor(runs, "layernorm", BY_KEY["test_bleu"]) == parts.sentences
    assert parts.sentences**0.5 == pytest.approx(0.26, abs=0.01)
    assert parts.seeds**0.5 == pytest.approx(1.73, abs=0.01)


def _copy_runs(tmp: Path, drop: dict[str, int] | None = None) -> dict[str, list]:
    """dyt_pre's records copied under `tmp`, `drop` {side: seed} losing its test outputs."""
    import shutil

    runs = {}
    for side in SIDES:
        runs[side] = []
        for s in (1, 2, 3):
            folder = tmp / side / f"seed-{s}"
            shutil.copytree(RECORDS / side / f"seed-{s}", folder)
            if (drop or {}).get(side) == s:
                RunDir(folder).test_hyps.unlink()
            runs[side].append(read_run(folder))
    return runs


def _by_hand(runs, level: float, alpha: float | None = None) -> tuple[float, float]:
    """The headline's centre and half width from the sentence statistics, by hand:
    sqrt((t(n - 1) se_seeds)^2 + (z se_sentences)^2) at `level`."""
    score = corpus_score("bleu")
    arm, base = (np.stack([sentence_stats(r.path, "bleu") for r in runs[s]]) for s in SIDES)
    d = contributions(arm, base, score)
    n, m = d.shape
    rows, cols = d.mean(axis=1), d.mean(axis=0)
    resid = d - rows[:, None] - cols[None, :] + d.mean()
    ms_int = (resid**2).sum() / ((n - 1) * (m - 1))
    seeds = rows.var(ddof=1) / n
    sentences = max(n * cols.var(ddof=1) - ms_int, 0.0) / (n * m)
    q = 0.5 + level / 2
    t, z = scipy.stats.t.ppf(q, n - 1), scipy.stats.norm.ppf(q)
    return float(d.mean()), float(np.sqrt(t * t * seeds + z * z * sentences))


@needs_test_set
def test_headline_and_looks_read_the_tables_statistic(tmp_path):
    """Through read_run -> Evidence -> headline and repeated on dyt_pre's records: the
    centre and the half width are the seeds x sentences table's, by hand, at the fixed
    level and at a look's nominal level (a changed standard error or quantile fails)."""
    from t2.experiments.statistics.sequential import planned_looks

    runs = _copy_runs(tmp_path)
    evidence = Evidence(BY_KEY["test_bleu"], runs["dyt"], runs["layernorm"])
    diff, half = _by_hand(runs, 0.95)
    found = evidence.headline(0.95)
    assert found.diff == pytest.approx(diff) and found.high - found.diff == pytest.approx(half)
    look = planned_looks((3, 6), 0.05)[0]
    diff, half = _by_hand(runs, 1.0 - look.alpha)
    span = evidence.repeated(look)
    assert span.diff == pytest.approx(diff) and span.high - span.diff == pytest.approx(half)
    assert span.low == pytest.approx(diff - half) and span.level == pytest.approx(1 - look.alpha)
    se, df, _ = evidence.standard_error()
    assert df == 2 and se == pytest.approx(float(evidence.parts().standard_error))


@needs_test_set
def test_a_seed_without_test_outputs_is_named_and_left_out_of_centre_and_variance(tmp_path):
    """Seed 3 of the baseline lost its test.hyps: the headline and the look are the two
    other seeds' table (centre and variance alike), and the method names seed 3."""
    from t2.experiments.statistics.sequential import planned_looks

    runs = _copy_runs(tmp_path, {"layernorm": 3})
    evidence = Evidence(BY_KEY["test_bleu"], runs["dyt"], runs["layernorm"])
    kept = {s: rs[:2] for s, rs in runs.items()}
    diff, half = _by_hand(kept, 0.95)
    found = evidence.headline(0.95)
    assert found.diff == pytest.approx(diff) and found.high - found.diff == pytest.approx(half)
    assert "seed 3: no test outputs in the baseline" in found.method
    look = planned_looks((3, 6), 0.05)[0]
    span = evidence.repeated(look)
    assert span.diff == pytest.approx(diff), "the look centres on the table's seeds"
    assert "seed 3: no test outputs in the baseline" in span.method


@needs_test_set
def test_a_results_figure_that_disagrees_with_the_rescore_does_not_move_the_interval(tmp_path):
    """results.json's BLEU of one seed off by 5 (or NaN): the headline and the look centre
    on the rescored table, the seeds its variance comes from."""
    import json

    from t2.experiments.statistics.sequential import planned_looks

    runs = _copy_runs(tmp_path)
    diff, _ = _by_hand(runs, 0.95)
    look = planned_looks((3, 6), 0.05)[0]
    for bad in (5.0, float("nan")):
        path = tmp_path / "dyt" / "seed-2" / "results.json"
        results = json.loads(path.read_text())
        results["bleu"] = results["bleu"] + bad if bad == bad else bad
        path.write_text(json.dumps(results))
        edited = {**runs, "dyt": [read_run(r.path) for r in runs["dyt"]]}
        evidence = Evidence(BY_KEY["test_bleu"], edited["dyt"], edited["layernorm"])
        assert evidence.headline(0.95).diff == pytest.approx(diff)
        assert evidence.repeated(look).diff == pytest.approx(diff)
        path.write_text(json.dumps({**results, "bleu": results["bleu"] - 5.0}))


@needs_test_set
def test_a_test_figure_without_its_table_has_no_verdict(tmp_path):
    """Without test outputs on two seeds, or with no seed shared, a test figure gets no
    interval and the verdict says why in one line (a paired or Welch t would claim a
    calibration it lacks: it cannot see the test set's variance)."""
    from t2.experiments.decisions.rule import Rule
    from t2.experiments.decisions.verdict import UNDECIDED, judge

    runs = _copy_runs(tmp_path, {"dyt": 1, "layernorm": 2})
    evidence = Evidence(BY_KEY["test_bleu"], runs["dyt"], runs["layernorm"])
    assert evidence.headline(0.95) is None and evidence.standard_error() is None
    word, why = judge(Rule(), evidence, None, None, None, [])  # type: ignore[arg-type]
    assert word == UNDECIDED and why.startswith("no verdict: the test set's variance")
    assert "keep each run's test.hyps.txt" in why and "\n" not in why
    unpaired = Evidence(BY_KEY["test_bleu"], runs["dyt"][:1], runs["layernorm"][1:])
    assert unpaired.headline(0.95) is None
    assert unpaired.refusal.startswith("no verdict: the arms share no seed")
    valid = Evidence(BY_KEY["valid_bleu"], runs["dyt"], runs["layernorm"])
    assert valid.headline(0.95) is not None  # other figures keep the paired t


@needs_test_set
def test_the_table_is_read_again_when_a_runs_outputs_are_replaced(tmp_path):
    """One process: a run's test.hyps replaced by the baseline's moves the parts (the
    cache is keyed by the files' times and sizes, not the folders alone)."""
    import os
    import shutil

    from t2.experiments.statistics.twoway import seeds_and_sentences

    runs = _copy_runs(tmp_path)
    arm = tuple(r.path for r in runs["dyt"])
    base = tuple(r.path for r in runs["layernorm"])
    before = seeds_and_sentences(arm, base, "bleu")
    target = RunDir(arm[0]).test_hyps
    stamp = target.stat().st_mtime_ns
    shutil.copyfile(RunDir(base[0]).test_hyps, target)
    os.utime(target, ns=(stamp, stamp))  # same time: the size still tells
    after = seeds_and_sentences(arm, base, "bleu")
    assert after.diff != pytest.approx(before.diff)


def test_seeds_on_test_sets_of_their_own_are_read_by_the_paired_t(tmp_path):
    """Issue 52 review: a generated task draws each seed's test set with the seed, so no
    two seeds share sentences and there is no seeds x sentences table. Each seed's
    difference then holds its own test set's noise, independent of the others': the
    paired t over seeds counts it, and the verdict reads it (not 'no verdict ... keep
    test.hyps', the advice for lost outputs)."""
    from test_experiments_report import fake_run

    from t2.experiments.decisions.rule import Rule
    from t2.experiments.decisions.verdict import judge
    from t2.rundir.layout import write_lines

    runs: dict[str, list] = {"a": [], "b": []}
    for seed in (1, 2, 3, 4):
        refs = [f"seed {seed} sentence {i} of its own" for i in range(20)]
        for side, loss in (("a", 2.0 + 0.1 * seed), ("b", 3.0 - 0.05 * seed)):
            path = tmp_path / side / f"seed-{seed}"
            fake_run(path, "quickstart", [f"train.seed={seed}"], loss)
            write_lines(RunDir(path).test_hyps, refs)
            write_lines(RunDir(path).test_refs, refs)  # an older run's kept copy
            runs[side].append(read_run(path))
    evidence = Evidence(BY_KEY["test_bleu"], runs["a"], runs["b"])
    diffs = [x.result("bleu") - y.result("bleu") for x, y in zip(runs["a"], runs["b"], strict=True)]
    t = scipy.stats.ttest_1samp(diffs, 0.0).confidence_interval(0.95)
    found = evidence.headline(0.95)
    assert evidence.refusal is None and found is not None
    assert (found.low, found.high) == pytest.approx((t.low, t.high))
    assert "each on its own test sentences" in found.method
    assert evidence.standard_error()[1] == 3
    word, why = judge(Rule(), evidence, None, None, None, [])  # type: ignore[arg-type]
    assert "no verdict" not in why and "each on its own test sentences" in why
