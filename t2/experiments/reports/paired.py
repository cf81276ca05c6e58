"""The report's verdict section: for each arm against the baseline, its verdict under each
reading given (t2.experiments.decisions.readings: a plan's rule, seeds and looks), then the seeds'
sacreBLEU tests pooled with their direction (Stouffer's method), printed as conditional on
these trained models, and each seed's paired bootstrap (mean +- 95% interval of both
systems, p) and approximate randomization (p) on the test split they share
(t2.experiments.statistics.significance)."""

from __future__ import annotations

from collections.abc import Sequence

from t2.experiments.decisions.readings import Decision, Reading, decide_family
from t2.experiments.statistics.evidence import Evidence
from t2.experiments.statistics.significance import (
    AR_TRIALS,
    BOOTSTRAP_SAMPLES,
    Paired,
    compare_seeds,
    pool,
)
from t2.experiments.statistics.welch import LEVEL, bracket
from t2.experiments.sweeps.metrics import METRICS, by_seed
from t2.experiments.sweeps.runs import Run


def _outputs(runs: list[Run]) -> dict[int, tuple[list[str], list[str]]]:
    return {r.seed: found for r in runs if (found := r.test_outputs()) is not None}


def _intro(baseline: str) -> str:
    return (
        f"## Verdict and paired significance (sacreBLEU)\n\nEach arm against `{baseline}`, "
        f"under each rule below (docs/experiments.md). The verdict reads the rule's "
        f"interval. Then, on the test sentences a seed's two runs share, sacreBLEU's paired "
        f"bootstrap ({BOOTSTRAP_SAMPLES} resamples; each system's mean ± {LEVEL:.0%} "
        f"interval, and p) and approximate randomization ({AR_TRIALS} trials, p, "
        f"two-sided), pooled over seeds with their direction by Stouffer's method: a test "
        f"of these trained models on these sentences, conditional on these seeds. It "
        f"does not count the seed-to-seed spread, so it is never the verdict.\n"
    )


def _line(label: str, decision: Decision) -> str:
    look = f"{decision.look.text()}: " if decision.look else ""
    if decision.word is None:
        return f"- {label}: no verdict: {decision.why}."
    return f"- {label}: {look}**{decision.word}**: {decision.why}."


def _head(arm: str, baseline: str, found: list[tuple[str, Decision]], held: str | None) -> str:
    if held is not None:
        return f"### {arm} vs {baseline}: no verdict ({held})\n"
    # the plan recorded before the first run leads; a later rule was chosen after the data
    # had been seen, and is said so, beside it, never first (issue 52: report 004)
    label, first = found[0]
    word = first.word or "no verdict"
    later = [f"{lab}, chosen after the data: {d.word or 'no verdict'}" for lab, d in found[1:]]
    beside = f" ({label}; " + "; ".join(later) + ")" if later else ""
    return f"### {arm} vs {baseline}: {word}{beside}\n"


def _intervals(arm: list[Run], base: list[Run], why: str) -> list[str]:
    """Each figure's headline interval, labelled with why it decides nothing."""
    lines = []
    for metric in METRICS:
        if not by_seed(arm, metric) or not by_seed(base, metric):
            continue
        span = Evidence(metric, arm, base).headline(LEVEL)
        if span is not None:
            shown = bracket(span.low, span.high, metric.digits)
            lines.append(
                f"- {metric.title}: {span.diff:+.{metric.digits}f} {shown} "
                f"({span.method}, {LEVEL:.0%}): {why}."
            )
    return lines


def _seed_table(tests: list[Paired]) -> list[str]:
    lines = [
        "| seed | sentences | baseline BLEU | arm BLEU | Δ | bootstrap p | AR p |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {t.seed} | {t.sentences} | {t.base_bleu:.2f} ± {t.base_ci:.2f} | "
        f"{t.arm_bleu:.2f} ± {t.arm_ci:.2f} | {t.delta:+.2f} | {t.bootstrap_p:.4f} "
        f"| {t.ar_p:.4f} |"
        for t in tests
    ]
    return [*lines, ""]


def paired_section(
    baseline: str,
    runs: dict[str, list[Run]],
    readings: Sequence[Reading],
    held: str | None = None,
) -> str:
    """Markdown: a heading per arm with its verdict under the last reading, a line per
    reading, the pooled tests and the seeds' table. `held` (e.g. "the plan changed"):
    why no verdict is given at all."""
    lines = [_intro(baseline)]
    base = runs.get(baseline, [])
    compared = {a: compare_seeds(_outputs(base), _outputs(rs)) for a, rs in runs.items()}
    tests = {arm: found[0] for arm, found in compared.items()}
    mine = [r for r in readings if r.baseline in (None, baseline)]
    families = [(r, decide_family(r, baseline, runs, tests)) for r in mine]
    for arm, rs in runs.items():
        if arm == baseline:
            continue
        notes = compared[arm][1]
        found = [(r.label, decided[arm]) for r, decided in families if arm in decided]
        reason = held if held is not None or found else "no rule names this arm"
        lines.append(_head(arm, baseline, found, reason))
        if held is not None:
            lines += _intervals(rs, base, held)
        if held is None:
            lines += [_line(label, d) for label, d in found]
        if tests[arm]:
            pooled = pool(tests[arm]).text()
            lines.append(
                f"- sacreBLEU's paired tests, pooled (conditional on these seeds): {pooled}."
            )
        lines.append("")
        if tests[arm]:
            lines += _seed_table(tests[arm])
        lines += [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"
