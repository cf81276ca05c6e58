"""The report's paired-significance section: for each arm against the baseline, each
seed's sacreBLEU paired bootstrap (mean ± 95% interval of both systems, p) and approximate
randomization (p) on the test split they share, and the verdict (t2.experiments.significance)."""

from __future__ import annotations

from collections.abc import Callable

from t2.experiments.runs import Run
from t2.experiments.significance import ALPHA, AR_TRIALS, BOOTSTRAP_SAMPLES, compare_seeds, verdict
from t2.experiments.stats import LEVEL, Difference, welch


def _outputs(runs: list[Run]) -> dict[int, tuple[list[str], list[str]]]:
    return {r.seed: found for r in runs if (found := r.test_outputs()) is not None}


def paired_section(
    baseline: str,
    runs: dict[str, list[Run]],
    value: Callable[[Run], float | None],
    planned: int | None = None,
) -> str:
    """Markdown: a table per arm and its verdict; `value` is the figure whose seeds give
    Welch's interval (test BLEU). Given the seeds `planned` per arm (a sweep's), a verdict
    on fewer is marked interim: a sweep stopped at its first significant look calls false
    differences more often than its level."""
    lines = [
        f"## Paired significance (sacreBLEU)\n\nEach arm against `{baseline}` on the test "
        f"sentences a seed's two runs share: sacreBLEU's paired bootstrap ({BOOTSTRAP_SAMPLES} "
        f"resamples; each system's mean ± {LEVEL:.0%} interval, and p) and approximate "
        f"randomization ({AR_TRIALS} trials, p), the seeds pooled by Fisher's method. "
        f"*better* / *worse* only when the pooled p is below {ALPHA} and Welch's interval "
        f"over seeds (with two seeds or more per arm) excludes 0, the test the power plan "
        f"sizes a sweep for (seeds moving the other way are counted, not a veto; with one "
        f"seed the paired tests decide); otherwise *not distinguishable at this budget*.\n"
    ]
    base = _outputs(runs.get(baseline, []))
    base_values = [v for r in runs.get(baseline, []) if (v := value(r)) is not None]
    for arm, rs in runs.items():
        if arm == baseline:
            continue
        tests, notes = compare_seeds(base, _outputs(rs))
        values = [v for r in rs if (v := value(r)) is not None]
        seeds: Difference | None = welch(values, base_values) if values and base_values else None
        word, why = verdict(tests, seeds)
        paired = len({r.seed for r in rs} & {r.seed for r in runs.get(baseline, [])})
        if planned is not None and paired < planned:
            word += f" (interim: {paired} of {planned} seeds)"
        lines.append(f"### {arm} vs {baseline}: {word}\n\n{why}.\n")
        if tests:
            lines += ["| seed | sentences | baseline BLEU | arm BLEU | Δ | bootstrap p | AR p |",
                      "|---|---|---|---|---|---|---|"]  # fmt: skip
            lines += [f"| {t.seed} | {t.sentences} | {t.base_bleu:.2f} ± {t.base_ci:.2f} | "
                      f"{t.arm_bleu:.2f} ± {t.arm_ci:.2f} | {t.delta:+.2f} | {t.bootstrap_p:.4f} "
                      f"| {t.ar_p:.4f} |" for t in tests]  # fmt: skip
            lines.append("")
        lines += [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"
