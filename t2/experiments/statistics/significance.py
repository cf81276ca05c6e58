"""Paired significance of two systems on the same sentences, from sacreBLEU's own tests
(sacrebleu.significance): paired bootstrap resampling (Koehn 2004), with each system's
mean and 95% confidence interval, and approximate randomization (Riezler & Maxwell 2005),
with its p-value. A run's test translations are written by training (RUN/test.hyps.txt,
t2.rundir's layout) and its references read from data.test (t2.experiments.sweeps.runs);
two runs of one seed share their test sentences, so each seed gives one paired comparison.

The seeds are pooled with their direction: each seed's two-sided approximate-randomization
p becomes a one-sided p for "the arm is better" (a seed where the arm is significantly
worse gives a p near 1, evidence against it), and Stouffer's method combines them
(scipy.stats.combine_pvalues(method="stouffer")). Fisher's method on two-sided p-values,
which t2 used before, counted a significantly worse seed as evidence for the arm. The
verdict itself is the sweep's decision rule's (t2.experiments.decisions.rule).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import scipy.stats
from sacrebleu.metrics import BLEU
from sacrebleu.significance import PairedTest

ALPHA = 0.05  # the level every verdict is taken at
BOOTSTRAP_SAMPLES = 1000  # sacreBLEU's default for --paired-bs
AR_TRIALS = 10000  # sacreBLEU's default for --paired-ar


@dataclass(frozen=True)
class Paired:
    """One seed's paired comparison of an arm with the baseline on the same sentences."""

    seed: int
    base_bleu: float
    arm_bleu: float
    base_ci: float  # paired bootstrap: the 95% interval's half-width around its mean
    arm_ci: float
    bootstrap_p: float
    ar_p: float  # approximate randomization
    sentences: int

    @property
    def delta(self) -> float:
        return self.arm_bleu - self.base_bleu


def paired_test(seed: int, base: Sequence[str], arm: Sequence[str], refs: Sequence[str]) -> Paired:
    """sacreBLEU's paired bootstrap and approximate randomization of `arm` against `base`."""
    if not (len(base) == len(arm) == len(refs)) or not refs:
        raise ValueError(
            f"paired systems need the same sentences: {len(base)}, {len(arm)}, {len(refs)}"
        )
    systems, metric = [("base", list(base)), ("arm", list(arm))], {"BLEU": BLEU()}
    _, bs = PairedTest(systems, metric, [list(refs)], "bs", BOOTSTRAP_SAMPLES)()
    _, ar = PairedTest(systems, metric, [list(refs)], "ar", AR_TRIALS)()
    (b, a), (_, a_ar) = bs["BLEU"], ar["BLEU"]
    return Paired(seed, b.score, a.score, b.ci, a.ci, a.p_value, a_ar.p_value, len(refs))


def one_sided(test: Paired) -> float:
    """The seed's p for "the arm is no better than the baseline": half the two-sided
    approximate-randomization p where the arm scored higher, one minus that half where it
    scored lower (a seed significantly worse gives a p near 1), 0.5 on a tie."""
    if test.delta > 0:
        return test.ar_p / 2.0
    return 1.0 - test.ar_p / 2.0 if test.delta < 0 else 0.5


@dataclass(frozen=True)
class Pooled:
    """The seeds' paired tests pooled with their direction: Stouffer's z over one-sided
    p-values (scipy's combine_pvalues), and per-seed counts at ALPHA."""

    z: float  # > 0: the seeds together lean to the arm
    p_better: float  # one-sided: that the arm is better
    p_worse: float  # one-sided: that the arm is worse
    better: int  # seeds significantly better (two-sided AR p < ALPHA)
    worse: int
    seeds: int

    def text(self) -> str:
        way, p = ("better", self.p_better) if self.z >= 0 else ("worse", self.p_worse)
        neither = self.seeds - self.better - self.worse
        return (
            f"Stouffer's z = {self.z:+.2f} over {self.seeds} seed{'s' * (self.seeds > 1)}, "
            f"one-sided p = {p:.3g} that the arm is {way}; per seed at {ALPHA}: "
            f"{self.better} better, {self.worse} worse, {neither} neither"
        )


def pool(tests: Sequence[Paired]) -> Pooled:
    """Stouffer's method on the seeds' one-sided p-values, each way: a seed where the arm
    is significantly worse counts against it."""
    up = [one_sided(t) for t in tests]
    better = scipy.stats.combine_pvalues(up, method="stouffer")
    worse = scipy.stats.combine_pvalues([1.0 - p for p in up], method="stouffer")
    significant = [t for t in tests if t.ar_p < ALPHA and t.delta != 0.0]
    return Pooled(
        float(better.statistic),
        float(better.pvalue),
        float(worse.pvalue),
        sum(t.delta > 0 for t in significant),
        sum(t.delta < 0 for t in significant),
        len(tests),
    )


def signs(tests: Sequence[Paired]) -> list[int]:
    """+1 / -1 per seed whose BLEU moved (a tie moves neither way)."""
    return [1 if t.delta > 0 else -1 for t in tests if t.delta != 0.0]


Outputs = dict[int, tuple[list[str], list[str]]]  # seed -> (test translations, references)


def compare_seeds(base: Outputs, arm: Outputs) -> tuple[list[Paired], list[str]]:
    """The paired test of every seed both sides have test outputs for, on the same
    references; and a note for each seed left out (missing outputs, other sentences)."""
    tests, notes = [], []
    for seed in sorted(set(base) | set(arm)):
        if seed not in base or seed not in arm:
            notes.append(f"seed {seed}: no test outputs on one side (trained before t2 wrote them)")
        elif base[seed][1] != arm[seed][1]:
            notes.append(f"seed {seed}: the two runs' test sentences differ; not paired")
        else:
            tests.append(paired_test(seed, base[seed][0], arm[seed][0], base[seed][1]))
    return tests, notes
