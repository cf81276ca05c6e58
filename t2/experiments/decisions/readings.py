"""Each arm's verdict under a plan's rule, at the look its finished runs make.

A reading is a rule with the seeds, arms and baseline of the plan it belongs to. A plan of
k arms against one baseline is one family, read with Holm's step-down (decide_family), so
the chance that any arm is called better or worse by chance stays at alpha. Read
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
    rule = reading.rule
    n, look = stage(reading, arm, base)
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
    return Decision(word, why, look)


DIFFERENT = ("better", "worse")  # the verdicts that reject "no difference"


def family(reading: Reading, baseline: str, runs: dict[str, list[Run]]) -> list[str]:
    """The arms `reading` compares with the baseline: its plan's (None: every arm run)."""
    arms = reading.arms if reading.arms is not None else tuple(runs)
    return [a for a in arms if a != baseline]


def decide_family(
    reading: Reading, baseline: str, runs: dict[str, list[Run]], tests: dict[str, list[Paired]]
) -> dict[str, Decision]:
    """Every arm of `reading` against `baseline`, with Holm's step-down across them: with k
    arms undecided, each is read at alpha / k; those then called better or worse are
    decided, k shrinks and the rest are read again, until a step decides none. An interval
    at level 1 - a excludes 0 exactly when p < a, so this is Holm's test on the arms'
    p-values, and any rule reading an interval or a p-value at alpha takes part unchanged:
    the chance of calling any arm different by chance stays at alpha
    (benchmarks/sim_family.py). `tests`: each arm's paired sacreBLEU tests."""
    arms, base, alpha = family(reading, baseline, runs), runs.get(baseline, []), reading.rule.alpha
    found: dict[str, Decision] = {}
    undecided = list(arms)
    while undecided:
        step = replace(reading, rule=replace(reading.rule, alpha=alpha / len(undecided)))
        now = {a: decide_arm(step, runs.get(a, []), base, tests.get(a, [])) for a in undecided}
        if len(arms) > 1:
            how = f"Holm across {len(arms)} arms: read at alpha {alpha:g}/{len(undecided)}"
            now = {a: replace(d, why=f"{d.why} ({how})") for a, d in now.items()}
        shown = [
            a for a in undecided if now[a].word is not None and now[a].word.startswith(DIFFERENT)
        ]
        found.update(now)
        if not shown:
            break
        undecided = [a for a in undecided if a not in shown]
    return {a: found[a] for a in arms}
