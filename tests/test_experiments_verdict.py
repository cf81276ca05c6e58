"""Verdicts (t2.experiments.decisions.verdict): the default rule reads its interval against 0 and
+-detect, its equivalence is scipy's two one-sided t-tests, same_sign's power is the
binomial chance that every seed moves the same way (report 004: 0.03), and the older rules
decide as they did."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from t2.experiments.decisions.rule import Rule
from t2.experiments.decisions.verdict import UNDECIDED, interval_verdict, judge, same_sign_power
from t2.experiments.statistics.evidence import Evidence, Span
from t2.experiments.statistics.significance import Paired, pool, signs
from t2.experiments.statistics.welch import welch
from t2.experiments.sweeps.metrics import BY_KEY
from t2.experiments.sweeps.runs import Run

ROOT = Path(__file__).resolve().parent.parent
RECORDS = ROOT / "docs" / "results" / "report004" / "records"
BLEU, LOSS, VALID = BY_KEY["test_bleu"], BY_KEY["valid_loss"], BY_KEY["valid_bleu"]


def _runs(values: dict[int, float], tmp: Path) -> list[Run]:
    """Finished runs with only a test BLEU and a last validation loss and BLEU (no test
    outputs: a test figure has no interval, the validation BLEU the paired t)."""
    logged = [{"valid_loss": v, "valid_bleu": v} for v in values.values()]
    return [
        Run(tmp / f"s{s}", "-", {"train.seed": s}, [row], {"bleu": v}, None, None)
        for (s, v), row in zip(values.items(), logged, strict=True)
    ]


def _span(low: float, high: float) -> Span:
    return Span((low + high) / 2, low, high, 0.95, "by hand")


@pytest.mark.parametrize(
    "low, high, word",
    [
        (1.2, 2.0, "better by at least 1"),
        (0.2, 0.8, "better, by less than 1"),
        (0.3, 1.4, "better"),  # whether by at least 1 is not shown
        (-0.9, 0.5, UNDECIDED),  # no equivalence interval given: not distinguishable
        (-2.0, -1.5, "worse by at least 1"),
        (-1.5, -0.1, "worse"),
    ],
)
def test_the_interval_is_read_against_zero_and_detect(low, high, word):
    found, why = interval_verdict(_span(low, high), BLEU, 1.0, None)
    assert found == word
    if word in ("better", "worse"):
        assert f"whether {word} by at least 1 is not shown" in why
    assert interval_verdict(_span(low, high), BLEU, None, None)[0] in ("better", "worse", UNDECIDED)


def test_lower_is_better_and_equivalence_within_detect():
    assert interval_verdict(_span(-0.3, -0.1), LOSS, 0.5, None)[0] == "better, by less than 0.5"
    narrow = _span(-0.4, 0.3)
    word, why = interval_verdict(_span(-0.6, 0.5), BLEU, 0.5, narrow)
    assert word == "equivalent within ±0.5" and "two one-sided tests" in why
    assert interval_verdict(_span(-0.6, 0.5), BLEU, 0.5, _span(-0.6, 0.3))[0] == UNDECIDED


@pytest.mark.parametrize("spread, want", [(0.4, "equivalent within ±1"), (2.5, UNDECIDED)])
def test_equivalence_is_scipys_two_one_sided_tests(spread, want, tmp_path):
    """The rule's equivalence on paired seeds (a validation figure: paired t) is exactly
    scipy's two one-sided t-tests at alpha: both p-values below 0.05."""
    rng = np.random.default_rng(7)
    z = rng.normal(size=12)
    gap = 0.1 + spread * (z - z.mean()) / z.std(ddof=1)  # mean 0.1, sd `spread`
    base = {s: 30.0 + rng.normal() for s in range(1, 13)}
    arm = {s: base[s] + gap[s - 1] for s in base}
    evidence = Evidence(VALID, _runs(arm, tmp_path / "a"), _runs(base, tmp_path / "b"))
    apart, gaps = welch(list(arm.values()), list(base.values())), [arm[s] - base[s] for s in base]
    word, _ = judge(Rule(detect=1.0), evidence, None, apart, None, [])
    lower = scipy.stats.ttest_1samp(gaps, -1.0, alternative="greater").pvalue
    upper = scipy.stats.ttest_1samp(gaps, 1.0, alternative="less").pvalue
    assert scipy.stats.ttest_1samp(gaps, 0.0).pvalue > 0.05  # the interval holds 0
    assert word == want and (word == "equivalent within ±1") == (max(lower, upper) < 0.05)


def test_same_sign_power_is_the_binomial_chance_every_seed_agrees():
    """Issue 49: with report 004's spread of per-seed differences (sd 1.02), all 15 seeds
    agree in sign with probability 0.03 even if the true difference is +0.84."""
    p = scipy.stats.norm.cdf(0.84 / 1.02)
    assert same_sign_power(0.84, 1.02, 15) == pytest.approx(scipy.stats.binom.pmf(15, 15, p))
    assert round(same_sign_power(0.84, 1.02, 15), 2) == 0.03
    draws = np.random.default_rng(0).normal(0.84, 1.02, (20_000, 15))
    assert (draws > 0).all(axis=1).mean() == pytest.approx(
        same_sign_power(0.84, 1.02, 15), abs=0.005
    )


def _report004() -> tuple[dict[int, float], dict[int, float]]:
    read = {
        arm: {
            s: json.loads((RECORDS / arm / f"seed-{s}" / "results.json").read_text())["bleu"]
            for s in range(1, 16)
        }
        for arm in ("v2", "base")
    }
    return read["v2"], read["base"]


def test_report_004_under_each_rule(tmp_path):
    """The paired t over its 15 seeds, [+0.27, +1.41], excludes 0 but not differences
    under detect 1: "better", with that said; same_sign cannot say better and prints its
    power beside its verdict."""
    v2, base = _report004()
    arm_runs, base_runs = _runs(v2, tmp_path / "v2"), _runs(base, tmp_path / "base")
    evidence = Evidence(VALID, arm_runs, base_runs)  # as paired figures, on the paired t
    apart = welch(list(v2.values()), list(base.values()))
    word, why = judge(Rule(detect=1.0), evidence, None, apart, None, [])
    assert word == "better" and "[+0.27, +1.41]" in why and "by at least 1 is not shown" in why
    tests = [Paired(s, base[s], v2[s], 1.4, 1.4, 0.01, 0.01, 1014) for s in base]
    word, why = judge(
        Rule(detect=1.0, decide="same_sign"), evidence, None, apart, pool(tests), signs(tests)
    )
    assert word == UNDECIDED and "the seeds disagree in sign" in why
    assert "spread 1.02, has probability 0.068: this rule's power is at most that" in why


def _paired(seed: int, delta: float, p: float) -> Paired:
    return Paired(seed, 30.0, 30.0 + delta, 0.8, 0.8, p, p, 500)


def test_the_older_rules_decide_as_they_did(tmp_path):
    base = {1: 30.0, 2: 30.4, 3: 29.7, 4: 30.2, 5: 29.9, 6: 30.1}
    deltas = {1: 1.2, 2: 0.9, 3: 1.1, 4: -0.3, 5: 1.4, 6: 0.8}  # one seed the other way
    arm = {s: base[s] + d for s, d in deltas.items()}
    tests = [_paired(s, d, 0.001 if d > 0 else 0.3) for s, d in deltas.items()]
    evidence = Evidence(BLEU, _runs(arm, tmp_path / "a"), _runs(base, tmp_path / "b"))
    apart, pooled, moved = welch(list(arm.values()), list(base.values())), pool(tests), signs(tests)
    word, why = judge(Rule(decide="paired_t"), evidence, None, apart, pooled, moved)
    assert word == "better" and "paired t, 6 seeds, p = 0.0" in why and "excludes 0" in why
    assert judge(Rule(decide="welch_pooled"), evidence, None, apart, pooled, moved)[0] == "better"
    word, why = judge(Rule(decide="same_sign"), evidence, None, apart, pooled, moved)
    assert word == UNDECIDED and "disagree in sign" in why
    word, why = judge(Rule(decide="same_sign"), evidence, None, apart, None, [])
    assert word == UNDECIDED and "needs two seeds" in why


def test_a_plans_arms_share_one_error_rate_holm(tmp_path):
    """Several arms against one baseline: Holm's step-down, so the family's chance of a
    false "better" stays at alpha (issue 52). Report 004's 15 seeds, read on validation
    BLEU with the paired t (p ~ 0.005): better alone; beside 19 null arms it is read at
    0.05/20 and is not; among 8 arms, once a much clearer arm is decided first, at 0.05/7."""
    from benchmarks.sim_family import family_error
    from t2.experiments.decisions.readings import Reading, decide_family

    v2, base = _report004()
    v2_runs, base_runs = _runs(v2, tmp_path / "v2"), _runs(base, tmp_path / "base")
    null_runs = _runs(base, tmp_path / "null")  # the baseline's own figures: no difference
    clear = _runs({s: v + 5.0 + 0.01 * s for s, v in base.items()}, tmp_path / "clear")
    rule = Rule(metric="valid_bleu", decide="paired_t")
    seeds = tuple(range(1, 16))

    def decide(others: dict[str, list]) -> dict:
        runs = {"base": base_runs, "v2": v2_runs, **others}
        reading = Reading("planned", rule, seeds, "base", tuple(runs))
        return decide_family(reading, "base", runs, {})

    alone = decide({})["v2"]
    assert alone.word == "better" and "Holm" not in alone.why
    crowd = decide({f"n{i}": null_runs for i in range(19)})["v2"]
    assert crowd.word == UNDECIDED and "Holm across 20 arms: read at alpha 0.05/20" in crowd.why
    # 8 arms: at 0.05/8 = 0.00625 only "clear" is called; then v2 at 0.05/7 = 0.0071 is
    stepped = decide({"clear": clear, **{f"n{i}": null_runs for i in range(6)}})
    assert stepped["clear"].word == "better" and stepped["v2"].word == "better"
    assert "read at alpha 0.05/7" in stepped["v2"].why  # after "clear" was decided
    # the simulation (benchmarks/sim_family.py): 6 arms at 3 seeds
    assert family_error(6, 3, 0.05, False, 4000, 1) > 0.15
    assert family_error(6, 3, 0.05, True, 4000, 1) < 0.06
