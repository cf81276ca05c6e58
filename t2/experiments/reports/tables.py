"""The report's results tables: per figure and arm, n, mean ± sd over seeds, and the
difference to the baseline with two intervals: Student's paired t over seeds
(t2.experiments.statistics.seeds), and for a test figure whose runs kept their translations,
Student's t over seeds and sentences (t2.experiments.statistics.twoway), which counts both sources
of noise (t2.experiments.statistics.evidence): the headline, whose cell says only whether
it excludes 0. The verdict is the plan's, in the verdict section alone."""

from __future__ import annotations

from t2.experiments.statistics.evidence import Evidence
from t2.experiments.statistics.seeds import correlation
from t2.experiments.statistics.welch import LEVEL, bracket, mean, sd
from t2.experiments.sweeps.metrics import Metric, by_seed
from t2.experiments.sweeps.runs import Run


def difference_cells(evidence: Evidence) -> list[str]:
    """Δ, the paired t interval, the t over seeds x sentences, and where the headline
    interval lies: it "excludes 0" or "contains 0". A table never says better or worse: a
    verdict is the plan's rule's, at its level and look, in the verdict section alone
    (t2.experiments.reports.paired), so no cell can disagree with it."""
    digits = evidence.metric.digits
    over = evidence.over(LEVEL)
    d = over.t
    if not d.has_interval:
        return [f"{d.diff:+.{digits}f}", f"- ({over.method}, n={over.n})", "-", "no interval"]
    paired = f"{bracket(d.low, d.high, digits)} ({over.method}, n={over.n})"
    both = evidence.two_level(LEVEL)
    boot = "-" if both is None else bracket(both.low, both.high, digits)
    headline = evidence.headline(LEVEL)
    cells = [f"{d.diff:+.{digits}f}", paired, boot]
    if headline is None:
        return [*cells, "no headline interval"]
    return [*cells, "contains 0" if headline.contains_zero() else "excludes 0"]


def paired_note(vs: dict[int, float], base: dict[int, float], metric: Metric) -> str:
    """How the shared seeds moved: the arm ahead in how many, and the correlation."""
    shared = sorted(set(vs) & set(base))
    if len(shared) < 2:
        return ""
    ahead = sum((vs[s] < base[s]) == metric.lower_is_better and vs[s] != base[s] for s in shared)
    r = correlation(vs, base)
    across = "" if r is None else f"; r = {r:.2f} across seeds"
    return f"ahead in {ahead} of {len(shared)} seeds{across}"


def metric_table(baseline: str, runs: dict[str, list[Run]], metric: Metric) -> str | None:
    values = {arm: by_seed(rs, metric) for arm, rs in runs.items()}
    if not any(values.values()):
        return None
    base = values[baseline]
    head = [
        "arm",
        "n",
        "mean ± sd",
        f"Δ vs {baseline}",
        f"paired t, {LEVEL:.0%}",
        f"t over seeds x sentences, {LEVEL:.0%}",
        f"headline {LEVEL:.0%}",
    ]
    lines = [f"### {metric.title}\n", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    notes = []
    for arm, found in values.items():
        vs = list(found.values())
        if not vs:
            lines.append(f"| {arm} | 0 | - | - | - | - | no finished run |")
            continue
        spread, digits = sd(vs), metric.digits
        cell = f"{mean(vs):.{digits}f}" + ("" if spread is None else f" ± {spread:.{digits}f}")
        if arm == baseline or not base:
            word = "baseline" if arm == baseline else "no baseline run"
            cells = ["-", "-", "-", word]
        else:
            cells = difference_cells(Evidence(metric, runs[arm], runs[baseline]))
            if note := paired_note(found, base, metric):
                notes.append(f"{arm}: {note}.")
        lines.append(f"| {arm} | {len(vs)} | {cell} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n" + "".join(f"\n{n}\n" for n in notes)
