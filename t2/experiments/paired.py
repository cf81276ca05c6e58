"""The report's verdict section: for each arm against the baseline, its verdict under each
decision rule given (t2.experiments.rule), the seeds' sacreBLEU tests pooled with their
direction (Stouffer's method), and each seed's paired bootstrap (mean ± 95% interval of
both systems, p) and approximate randomization (p) on the test split they share
(t2.experiments.significance)."""

from __future__ import annotations

from collections.abc import Sequence

from t2.experiments.metrics import BY_KEY, by_seed
from t2.experiments.rule import DECIDE, Rule, decide
from t2.experiments.runs import Run
from t2.experiments.seeds import over_seeds
from t2.experiments.significance import (
    AR_TRIALS,
    BOOTSTRAP_SAMPLES,
    Paired,
    compare_seeds,
    pool,
    signs,
)
from t2.experiments.stats import LEVEL, welch


def _outputs(runs: list[Run]) -> dict[int, tuple[list[str], list[str]]]:
    return {r.seed: found for r in runs if (found := r.test_outputs()) is not None}


def _intro(baseline: str) -> str:
    return (
        f"## Verdict and paired significance (sacreBLEU)\n\nEach arm against `{baseline}`, "
        f"under the decision rule (`{'`, `'.join(DECIDE)}`: docs/experiments.md). On the "
        f"test sentences a seed's two runs share, sacreBLEU's paired bootstrap "
        f"({BOOTSTRAP_SAMPLES} resamples; each system's mean ± {LEVEL:.0%} interval, and p) "
        f"and approximate randomization ({AR_TRIALS} trials, p, two-sided); the seeds pooled "
        f"with their direction by Stouffer's method on one-sided p-values, so a seed where "
        f"the arm is significantly worse counts against it.\n"
    )


def _verdicts(
    rules: Sequence[tuple[str, Rule]], rs: list[Run], base: list[Run], tests: list[Paired]
) -> list[tuple[str, str, str]]:
    """(label, word, why) of the arm under each rule."""
    pooled = pool(tests) if tests else None
    found = []
    for label, rule in rules:
        metric, level = BY_KEY[rule.metric], 1.0 - rule.alpha
        arm_values, base_values = by_seed(rs, metric), by_seed(base, metric)
        if not arm_values or not base_values:
            found.append((label, "not distinguishable at this budget", "no finished run"))
            continue
        over = over_seeds(arm_values, base_values, level)
        unpaired = welch(list(arm_values.values()), list(base_values.values()), level)
        word, why = decide(rule, over, unpaired, pooled, signs(tests))
        found.append((label, word, why))
    return found


def _head(verdicts: list[tuple[str, str, str]]) -> str:
    """The verdict under the rule that applies (the last), and under the planned rule
    (the first) beside it when the rule was changed."""
    (first, planned, _), (last, word, _) = verdicts[0], verdicts[-1]
    return word if len(verdicts) == 1 else f"{word} ({last}; {first}: {planned})"


def paired_section(
    baseline: str,
    runs: dict[str, list[Run]],
    rules: Sequence[tuple[str, Rule]],
    interim: str | None = None,
) -> str:
    """Markdown: a heading per arm with its verdict under the last of `rules` (each a
    label and a rule), a line per rule, the pooled tests and the seeds' table. `interim`
    (e.g. "8 of 30 runs"): a look before all planned runs are in, which carries no
    verdict (a sweep stopped at its first look that clears the level calls false
    differences more often than that level)."""
    lines = [_intro(baseline)]
    base = runs.get(baseline, [])
    for arm, rs in runs.items():
        if arm == baseline:
            continue
        tests, notes = compare_seeds(_outputs(base), _outputs(rs))
        verdicts = _verdicts(rules, rs, base, tests)
        head = f"interim look ({interim}): no verdict" if interim else _head(verdicts)
        lines.append(f"### {arm} vs {baseline}: {head}\n")
        if not interim:
            lines += [f"- {label}: **{word}**: {why}." for label, word, why in verdicts]
        if tests:
            lines.append(f"- sacreBLEU's paired tests, pooled: {pool(tests).text()}.")
        lines.append("")
        if tests:
            lines += [
                "| seed | sentences | baseline BLEU | arm BLEU | Δ | bootstrap p | AR p |",
                "|---|---|---|---|---|---|---|",
            ]
            lines += [
                f"| {t.seed} | {t.sentences} | {t.base_bleu:.2f} ± {t.base_ci:.2f} | "
                f"{t.arm_bleu:.2f} ± {t.arm_ci:.2f} | {t.delta:+.2f} | {t.bootstrap_p:.4f} "
                f"| {t.ar_p:.4f} |"
                for t in tests
            ]
            lines.append("")
        lines += [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"
