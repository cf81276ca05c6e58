"""Paired significance of two systems on the same sentences, from sacreBLEU's own tests
(sacrebleu.significance): paired bootstrap resampling (Koehn 2004), with each system's
mean and 95% confidence interval, and approximate randomization (Riezler & Maxwell 2005),
with its p-value. A run's test translations and references are written by training
(RUN/test.hyps.txt, RUN/test.refs.txt, t2.rundir's layout); two runs of one seed share
their test sentences, so each seed gives one paired comparison, and the seeds are pooled
(Fisher's method over the approximate-randomization p-values, scipy's combine_pvalues).

The verdict says "better" or "worse" only when the pooled paired test rejects equality at
ALPHA and, with two seeds or more per arm, Welch's interval over seeds excludes zero (a
paired test sees the test set's sampling noise, not the seed-to-seed spread that Narang et
al. 2021 found as large as most modifications); Welch's test is the one the power plan
sizes a sweep for, so seeds that move the other way are counted in the sentence, not a
veto: with enough seeds some always do. With one seed per arm, the paired tests decide
and must agree in sign. Otherwise "not distinguishable at this budget", with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import scipy.stats
from sacrebleu.metrics import BLEU
from sacrebleu.significance import PairedTest

from t2.experiments.stats import Difference

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
        raise ValueError(f"paired systems need the same sentences: {len(base)}, {len(arm)}, "
                         f"{len(refs)}")  # fmt: skip
    systems, metric = [("base", list(base)), ("arm", list(arm))], {"BLEU": BLEU()}
    _, bs = PairedTest(systems, metric, [list(refs)], "bs", BOOTSTRAP_SAMPLES)()
    _, ar = PairedTest(systems, metric, [list(refs)], "ar", AR_TRIALS)()
    (b, a), (_, a_ar) = bs["BLEU"], ar["BLEU"]
    return Paired(seed, b.score, a.score, b.ci, a.ci, a.p_value, a_ar.p_value, len(refs))


def pooled_p(tests: Sequence[Paired]) -> float:
    """Fisher's combination of the seeds' approximate-randomization p-values."""
    if len(tests) == 1:
        return tests[0].ar_p
    return float(scipy.stats.combine_pvalues([t.ar_p for t in tests], method="fisher").pvalue)


def verdict(tests: Sequence[Paired], seeds: Difference | None) -> tuple[str, str]:
    """("better" | "worse" | "not distinguishable at this budget", why) of an arm against
    the baseline, from its seeds' paired tests and Welch's interval over seeds (`seeds`,
    None or without interval with one seed per arm)."""
    if not tests:
        return "not distinguishable at this budget", "no seed has both runs' test outputs"
    p, mean_delta = pooled_p(tests), sum(t.delta for t in tests) / len(tests)
    pooled = f"paired p = {p:.3g} over {len(tests)} seed{'s' * (len(tests) > 1)}"
    signs = [math.copysign(1.0, t.delta) for t in tests if t.delta != 0.0]
    if p >= ALPHA:
        return "not distinguishable at this budget", f"{pooled} (not below {ALPHA})"
    if not signs:  # sacreBLEU gives equal outputs a tiny p (multeval's rule): no change
        return "not distinguishable at this budget", f"{pooled}, but BLEU is unchanged"
    if seeds is None or not seeds.has_interval:  # the paired tests are all there is
        if len(set(signs)) > 1:
            return "not distinguishable at this budget", f"{pooled}, but the seeds disagree in sign"
        word = "better" if mean_delta > 0 else "worse"
        return word, f"BLEU {mean_delta:+.2f}: {pooled}, every seed the same way"
    # with seeds to measure their spread, Welch's interval decides: the test the power
    # plan sizes the sweep for (t2.experiments.planning); a seed moving the other way
    # is the spread that interval already holds, so it is reported, not a veto
    interval = f"the interval over seeds [{seeds.low:+.2f}, {seeds.high:+.2f}]"
    if seeds.contains_zero():
        return ("not distinguishable at this budget",
                f"{pooled}, but {interval} holds 0: the seed-to-seed spread is as large as "
                f"the change")  # fmt: skip
    if (seeds.diff > 0) != (mean_delta > 0):
        return ("not distinguishable at this budget",
                f"{pooled}, but the paired seeds ({mean_delta:+.2f}) and the means over seeds "
                f"({seeds.diff:+.2f}) point different ways")  # fmt: skip
    against = sum(s != math.copysign(1.0, seeds.diff) for s in signs)
    ways = "every seed the same way" if not against else (
        f"{against} of {len(tests)} seeds the other way")  # fmt: skip
    word = "better" if seeds.diff > 0 else "worse"
    return word, f"BLEU {seeds.diff:+.2f}: {interval} excludes 0 and {pooled} ({ways})"


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
