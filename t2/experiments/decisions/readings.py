"""Each arm's verdict under a plan's rule, at the look its finished runs make.

A reading is a rule with the seeds, arms and baseline of the plan it belongs to. A plan of
k arms against one baseline reads each at alpha / k (Bonferroni), so the chance that any of
them is called better or worse by chance stays at alpha (benchmarks/sim_family.py). Read
with every planned seed in, a fixed design gives its verdict. Read earlier, it gives none:
an unplanned look. A plan with looks (t2.experiments.statistics.sequential) gives a verdict at each
planned look: the first n_k of its seeds are in for the arm and the baseline, n_k a
look's seeds; the verdict reads that look's interval, on those seeds only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from t2.experiments.decisions.rule import Rule
from t2.experiments.decisions.verdict import judge
from t2.experiments.statistics.evidence import Evidence
from t2.experiments.statistics.sequential import Look, look_at
from t2.experiments.statistics.significance import Paired, pool, signs
from t2.experiments.statistics.welch import welch
from t2.experiments.sweeps.metrics import BY_KEY, by_seed
from t2.experiments.sweeps.runs import Run


@dataclass(frozen=True)
class Reading:
    """A rule to render verdicts under, with its plan's seeds, baseline and arms (None:
    every run the report has, as `t2 compare` reads)."""

    label: str
    rule: Rule
    seeds: tuple[int, ...] | None = None
    baseline: str | None = None
    arms: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Decision:
    word: str | None  # None: no verdict at this look
    why: str
    look: Look | None = None


def _complete(seeds: tuple[int, ...], arm: list[Run], base: list[Run], rule: Rule) -> int:
    """How many of the plan's first seeds both sides have finished, in the plan's order."""
    metric = BY_KEY[rule.metric]
    have = set(by_seed(arm, metric)) & set(by_seed(base, metric))
    return next((i for i, s in enumerate(seeds) if s not in have), len(seeds))


def stage(reading: Reading, arm: list[Run], base: list[Run]) -> tuple[int | None, Look | None]:
    """(the seeds the verdict reads, the planned look) of one arm: (None, None) when this
    is no planned look; (n, None) for a fixed design with all its seeds in."""
    if reading.seeds is None:
        return len(arm), None
    rule, total = reading.rule, len(reading.seeds)
    n = _complete(reading.seeds, arm, base, rule)
    if rule.looks:
        look = look_at(n, rule.looks, rule.alpha)
        return (n, look) if look is not None else (None, None)
    return (n, None) if n == total else (None, None)


def _among(runs: list[Run], seeds: tuple[int, ...] | None) -> list[Run]:
    return runs if seeds is None else [r for r in runs if r.seed in seeds]


def decide_arm(reading: Reading, arm: list[Run], base: list[Run], tests: list[Paired]) -> Decision:
    """The arm's verdict under `reading`, or why it has none; `tests` are the seeds'
    paired sacreBLEU tests (welch_pooled and same_sign read them)."""
    rule, family = reading.rule, family_size(reading)
    if family > 1:  # Bonferroni across the plan's arms: the family's error stays at alpha
        rule = replace(rule, alpha=rule.alpha / family)
    n, look = stage(replace(reading, rule=rule), arm, base)
    if n is None:
        planned = ", ".join(map(str, rule.looks)) if rule.looks else len(reading.seeds or ())
        return Decision(None, f"not a planned look (planned: {planned} seeds)")
    seeds = None if reading.seeds is None else reading.seeds[:n]
    arm, base = _among(arm, seeds), _among(base, seeds)
    metric = BY_KEY[rule.metric]
    tests = [t for t in tests if seeds is None or t.seed in seeds]
    if not by_seed(arm, metric) or not by_seed(base, metric):
        return Decision(None, "no finished run")
    evidence = Evidence(metric, arm, base)
    values = list(by_seed(arm, metric).values()), list(by_seed(base, metric).values())
    apart = welch(*values, 1.0 - rule.alpha)
    word, why = judge(rule, evidence, look, apart, pool(tests) if tests else None, signs(tests))
    if family > 1:
        why += f" (alpha {reading.rule.alpha:g} / {family} arms: Bonferroni, the family's level)"
    return Decision(word, why, look)


def family_size(reading: Reading) -> int:
    """The arms a plan compares with its baseline: its verdicts share one error rate."""
    if reading.arms is None:
        return 1
    return max(1, len([a for a in reading.arms if a != reading.baseline]))
