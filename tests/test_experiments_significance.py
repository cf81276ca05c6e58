"""Paired significance (t2.experiments.significance, sacreBLEU's tests): systems built to
differ are told apart and systems built to tie are not; Fisher's pooling against its
closed form; the verdict sentence follows the figures, "not distinguishable" included;
the sweep report's section from runs' own test outputs."""

from __future__ import annotations

import math
import random

import pytest
from test_experiments_report import fake_run

from t2.experiments.paired import paired_section
from t2.experiments.runs import read_run
from t2.experiments.significance import Paired, paired_test, pooled_p, verdict
from t2.experiments.stats import welch
from t2.rundir import RunDir
from t2.rundir.layout import write_lines

WORDS = ["the", "a", "dog", "cat", "runs", "sleeps", "on", "under", "red", "green", "small",
         "big", "house", "tree"]  # fmt: skip


def _corpus(n: int = 300, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 12))) for _ in range(n)]


def _damage(refs: list[str], share: float, seed: int) -> list[str]:
    """The references with the last half of the words replaced in `share` of the lines."""
    rng = random.Random(seed)
    out = []
    for line in refs:
        words = line.split()
        if rng.random() < share:
            words[len(words) // 2 :] = ["zzz"] * (len(words) - len(words) // 2)
        out.append(" ".join(words))
    return out


def test_systems_built_to_differ_are_told_apart_and_a_tie_is_not():
    refs = _corpus()
    good, bad = _damage(refs, 0.1, 1), _damage(refs, 0.6, 2)
    better = paired_test(1, bad, good, refs)
    assert better.delta > 5 and better.ar_p < 0.01 and better.bootstrap_p < 0.01
    assert better.base_ci > 0 and better.arm_ci > 0 and better.sentences == 300
    even = [" ".join(line.split()[:6]) for line in refs]  # six words a line
    cut = [" ".join(line.split()[:3] + ["zzz"] * 3) for line in even]
    base = [c if i % 5 == 0 else e for i, (c, e) in enumerate(zip(cut, even, strict=True))]
    arm = [c if i % 5 == 1 else e for i, (c, e) in enumerate(zip(cut, even, strict=True))]
    tie = paired_test(1, base, arm, even)  # as good, wrong on other lines
    assert abs(tie.delta) < 1 and tie.ar_p > 0.2 and tie.bootstrap_p > 0.2
    assert verdict([tie], None)[0] == "not distinguishable at this budget"
    same = paired_test(1, good, list(good), refs)  # sacreBLEU: no difference is no chance
    assert same.delta == 0 and verdict([same], None) == (
        "not distinguishable at this budget", f"paired p = {same.ar_p:.3g} over 1 seed, but "
        "BLEU is unchanged")  # fmt: skip
    with pytest.raises(ValueError, match="the same sentences"):
        paired_test(1, good[:-1], good, refs)


def test_fisher_pooling_matches_its_closed_form():
    """-2 (ln p1 + ln p2) is chi-squared with 4 degrees of freedom: P = e^(-x/2) (1 + x/2)."""
    tests = [Paired(s, 30.0, 31.0, 1.0, 1.0, p, p, 100) for s, p in ((1, 0.01), (2, 0.04))]
    x = -2 * (math.log(0.01) + math.log(0.04))
    assert pooled_p(tests) == pytest.approx(math.exp(-x / 2) * (1 + x / 2), rel=1e-9)
    assert pooled_p(tests[:1]) == 0.01


def _paired(seed: int, delta: float, p: float) -> Paired:
    return Paired(seed, 30.0, 30.0 + delta, 0.8, 0.8, p, p, 500)


def test_the_verdict_follows_the_figures():
    clear = [_paired(1, 1.2, 0.001), _paired(2, 0.9, 0.004), _paired(3, 1.1, 0.002)]
    apart = welch([31.2, 30.9, 31.1], [30.0, 30.1, 29.9])
    word, why = verdict(clear, apart)
    assert word == "better" and "every seed the same way" in why and "excludes 0" in why
    assert verdict([_paired(s, -d, p) for s, d, p in ((1, 1.2, 0.001), (2, 0.9, 0.004))],
                   None)[0] == "worse"  # fmt: skip
    cases = {
        "not below 0.05": [_paired(1, 0.3, 0.4), _paired(2, 0.2, 0.5)],
        "disagree in sign": [_paired(1, 1.5, 0.001), _paired(2, -1.4, 0.001)],
    }
    for reason, tests in cases.items():
        word, why = verdict(tests, None)
        assert word == "not distinguishable at this budget" and reason in why, why
    noisy = welch([31.2, 29.0, 33.1], [30.0, 31.5, 28.9])  # seeds spread more than the change
    word, why = verdict(clear, noisy)
    assert word == "not distinguishable at this budget" and "holds 0" in why
    # many seeds: one moves the other way, but the interval over seeds (the test the power
    # plan sizes the sweep for) excludes 0, so the seed is counted, not a veto
    deltas = [1.2, 0.9, 1.1, -0.3, 1.4, 0.8, 1.0, 1.3]
    many = [_paired(s, d, 0.001 if d > 0 else 0.3) for s, d in enumerate(deltas, 1)]
    base = [30.0, 30.4, 29.7, 30.2, 29.9, 30.1, 30.3, 29.8]
    seeds = welch([b + d for b, d in zip(base, deltas, strict=True)], base)
    assert seeds.low > 0
    word, why = verdict(many, seeds)
    assert word == "better" and "excludes 0" in why and "1 of 8 seeds the other way" in why
    against = [_paired(s, -d, 0.001) for s, d in enumerate((1.2, 0.9, 1.1), 1)]
    word, why = verdict(against, apart)  # the paired seeds worse, the means over seeds better
    assert word == "not distinguishable at this budget" and "point different ways" in why
    assert verdict([], None)[0] == "not distinguishable at this budget"


def test_the_report_section_reads_the_runs_test_outputs(tmp_path):
    refs = _corpus(200, seed=3)
    runs = {"base": [], "arm": []}
    for arm, share in (("base", 0.6), ("arm", 0.1)):
        for seed in (1, 2):
            path = tmp_path / arm / f"seed-{seed}"
            fake_run(path, "quickstart", [f"train.seed={seed}"], 1.0)
            write_lines(RunDir(path).test_hyps, _damage(refs, share, seed))
            write_lines(RunDir(path).test_refs, refs)
            runs[arm].append(read_run(path))
    text = paired_section("base", runs, lambda r: r.result("bleu"))
    assert "### arm vs base: not distinguishable at this budget" in text  # equal results.json
    assert "holds 0" in text and "| 1 | 200 |" in text and "| 2 | 200 |" in text
    text = paired_section("base", runs, lambda r: None)  # no seed figures: the paired tests
    assert "### arm vs base: better\n" in text
    assert "### arm vs base: better (interim: 2 of 3 seeds)\n" in paired_section(
        "base", runs, lambda r: None, planned=3
    )  # a sweep read before its planned seeds are in says so beside the word
    assert "interim" not in paired_section("base", runs, lambda r: None, planned=2)
    apart = {"base": runs["base"][:1], "arm": runs["arm"][1:]}  # seeds 1 and 2: none shared
    assert "(interim: 0 of 2 seeds)" in paired_section("base", apart, lambda r: None, planned=2)
    (tmp_path / "arm" / "seed-2" / "test.refs.txt").write_text("other\n" * 200)
    runs["arm"][1] = read_run(tmp_path / "arm" / "seed-2")
    assert "seed 2: the two runs' test sentences differ" in paired_section(
        "base", runs, lambda r: None
    )
