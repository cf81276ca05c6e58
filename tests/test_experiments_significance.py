"""Paired significance (t2.experiments.statistics.significance, sacreBLEU's tests): systems built to
differ are told apart and systems built to tie are not; each seed's test equals sacreBLEU's
command line on the same files; Stouffer's directional pooling against its closed form, a
significantly worse seed counting against the arm; the report's verdict section from
runs' own test outputs, under each decision rule, and no verdict when it is held back."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from statistics import NormalDist

import pytest
from test_experiments_report import fake_run

from t2.experiments.decisions.readings import Reading
from t2.experiments.decisions.rule import Rule
from t2.experiments.reports.paired import paired_section
from t2.experiments.statistics.significance import Paired, paired_test, pool, signs
from t2.experiments.sweeps.runs import read_run
from t2.rundir import RunDir
from t2.rundir.layout import write_lines

WORDS = [
    "the",
    "a",
    "dog",
    "cat",
    "runs",
    "sleeps",
    "on",
    "under",
    "red",
    "green",
    "small",
    "big",
    "house",
    "tree",
]


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
    same = paired_test(1, good, list(good), refs)  # sacreBLEU: no difference is no chance
    assert same.delta == 0 and signs([same]) == [] and pool([same]).p_better == 0.5
    with pytest.raises(ValueError, match="the same sentences"):
        paired_test(1, good[:-1], good, refs)


def test_each_seeds_test_is_sacrebleus_command_line_on_the_same_files(tmp_path):
    refs = _corpus(100)
    base, arm = _damage(refs, 0.4, 1), _damage(refs, 0.3, 2)
    for name, lines in (("refs", refs), ("base", base), ("arm", arm)):
        (tmp_path / f"{name}.txt").write_text("\n".join(lines) + "\n")
    found = paired_test(1, base, arm, refs)
    for flag, p in (("--paired-bs", found.bootstrap_p), ("--paired-ar", found.ar_p)):
        cmd = [sys.executable, "-m", "sacrebleu", "refs.txt", "-i", "base.txt", "arm.txt"]
        out = subprocess.run(
            [*cmd, "-m", "bleu", flag, "--format", "json"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        baseline, system = json.loads(out)
        assert system["BLEU"]["score"] == pytest.approx(found.arm_bleu, abs=1e-9)
        assert baseline["BLEU"]["score"] == pytest.approx(found.base_bleu, abs=1e-9)
        assert system["BLEU"]["p_value"] == pytest.approx(p, abs=1e-12)
        if flag == "--paired-bs":
            assert system["BLEU"]["ci"] == pytest.approx(found.arm_ci, abs=1e-9)


def _paired(seed: int, delta: float, p: float) -> Paired:
    return Paired(seed, 30.0, 30.0 + delta, 0.8, 0.8, p, p, 500)


def test_stouffers_pooling_has_a_direction():
    """Stouffer's z is the sum of the seeds' normal quantiles over sqrt(k): two seeds each
    better at one-sided p = 0.05 (two-sided 0.10) pool to z = 2 x 1.645 / sqrt(2) = 2.326,
    p = 0.01; one better and one as significantly worse pool to z = 0, p = 0.5, where
    Fisher's method on the two-sided p-values gave 0.05 (evidence for the arm)."""
    z = 2 * NormalDist().inv_cdf(0.95) / 2**0.5
    both = pool([_paired(1, 1.0, 0.10), _paired(2, 0.8, 0.10)])
    assert both.z == pytest.approx(z, rel=1e-12) and both.p_better == pytest.approx(0.01, abs=1e-4)
    assert both.p_worse == pytest.approx(1 - both.p_better, rel=1e-9)
    against = pool([_paired(1, 1.0, 0.04), _paired(2, -1.0, 0.04)])
    assert against.z == pytest.approx(0.0, abs=1e-12) and against.p_better == pytest.approx(0.5)
    assert (against.better, against.worse, against.seeds) == (1, 1, 2)
    worse = pool([_paired(1, -1.2, 0.001), _paired(2, -0.9, 0.004), _paired(3, 0.1, 0.9)])
    assert worse.z < 0 and worse.p_worse < 0.01 and "arm is worse" in worse.text()
    assert "per seed at 0.05: 0 better, 2 worse, 1 neither" in worse.text()


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
    paired = [Reading("rule", Rule(decide="paired_t"))]
    same_sign = [Reading("planned", Rule(decide="same_sign"))]
    text = paired_section("base", runs, paired)
    assert "### arm vs base: not distinguishable at this budget" in text  # equal results.json
    assert "holds 0" in text and "| 1 | 200 |" in text and "| 2 | 200 |" in text
    assert "Stouffer's z = +" in text and "2 better, 0 worse" in text
    assert "pooled (conditional on these seeds)" in text
    default = Reading("default", Rule())  # reads t over seeds and sentences
    text = paired_section("base", runs, [*same_sign, default, *paired])  # the plan heads
    assert "- planned: **not distinguishable at this budget**" in text
    assert "(t over 2 seeds and their test sentences, 1 df (standard error of seeds" in text
    head = "### arm vs base: not distinguishable at this budget (planned; default, chosen after"
    assert head in text and "; rule, chosen after the data: not distinguishable" in text
    held = paired_section("base", runs, paired, held="the plan changed: see Plan")
    assert "### arm vs base: no verdict (the plan changed: see Plan)\n" in held
    assert "**" not in held  # no verdict word anywhere
    (tmp_path / "arm" / "seed-2" / "test.refs.txt").write_text("other\n" * 200)
    runs["arm"][1] = read_run(tmp_path / "arm" / "seed-2")
    assert "seed 2: the two runs' test sentences differ" in paired_section("base", runs, paired)
