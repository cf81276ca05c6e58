"""A sweep's report, generated from its runs' own files. At the top, the plan as recorded
before the first run and everything that differs from it (t2.experiments.reports.disclosure).
Then per arm the mean and standard deviation over seeds, the difference to the baseline
arm with its intervals (t2.experiments.reports.tables), and whether the headline interval
excludes zero: description, never a verdict. Then each arm's
verdict under the plan's rule (t2.experiments.reports.paired): at a planned look or with every
planned run in, and only when what ran is the plan, or when `--plan-changed` asks."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from t2.experiments.decisions.plan import plan_of
from t2.experiments.decisions.planbook import Book
from t2.experiments.reports.compare import count, duration, validation_note, write_text
from t2.experiments.reports.disclosure import disclose
from t2.experiments.reports.paired import paired_section
from t2.experiments.reports.plots import plot_curves
from t2.experiments.reports.tables import metric_table
from t2.experiments.statistics.welch import LEVEL, mean
from t2.experiments.sweeps.metrics import METRICS
from t2.experiments.sweeps.robust import SENTENCES, robustness_tables
from t2.experiments.sweeps.runs import Run, read_run
from t2.experiments.sweeps.sweepfile import Sweep
from t2.rundir import RunDir

ENDED = {"steps": "steps", "tokens": "train_tokens", "time": "elapsed_s"}


def collect(sweep: Sweep, out: Path) -> tuple[dict[str, list[Run]], list[tuple[str, int]]]:
    """Finished runs per arm (seed order) and the (arm, seed) of those not finished."""
    runs: dict[str, list[Run]] = {}
    missing: list[tuple[str, int]] = []
    for arm in sweep.arms:
        runs[arm.name] = []
        for seed in sweep.seeds:
            path = sweep.run_dir(out, arm, seed)
            if RunDir(path).results.is_file():
                runs[arm.name].append(read_run(path))
            else:
                missing.append((arm.name, seed))
    return runs, missing


def _mean_of(runs: list[Run], key: str) -> float | None:
    values = [v for r in runs if (v := r.final(key)) is not None]
    return mean(values) if values else None


def arms_table(sweep: Sweep, runs: dict[str, list[Run]]) -> str:
    """Where the runs ended (means over seeds), the compare_at axis first."""
    order = [sweep.compare_at] + [a for a in ENDED if a != sweep.compare_at]
    titles = {"steps": "steps", "tokens": "train tokens", "time": "wall time"}
    lines = [
        "| arm | recipe | overrides | parameters | "
        + " | ".join(titles[a] for a in order)
        + " | stopped by |",
        "|---|---|---|---|" + "---|" * (len(order) + 1),
    ]
    for arm in sweep.arms:
        rs = runs[arm.name]
        cells = []
        for axis in order:
            v = _mean_of(rs, ENDED[axis])
            cells.append("-" if v is None else duration(v) if axis == "time" else f"{v:,.0f}")
        params = {r.parameters for r in rs} - {None}
        stopped = sorted({str(r.result("stopped_by")) for r in rs if r.result("stopped_by")})
        lines.append(
            f"| {arm.name} | {arm.recipe} | {', '.join(arm.own) or '-'} | "
            f"{', '.join(count(p) for p in sorted(params)) or '-'} | "
            f"{' | '.join(cells)} | {', '.join(stopped) or '-'} |"
        )
    return "\n".join(lines) + "\n"


def machines(runs: dict[str, list[Run]]) -> str:
    """Where the runs trained (meta.json's machine, t2.machine), with how many each: wall
    times from different machines are not comparable."""
    unknown = "not recorded (trained before t2 wrote it)"
    found = Counter(r.machine or unknown for rs in runs.values() for r in rs)
    shown = "; ".join(f"{name} ({n} run{'s' * (n > 1)})" for name, n in found.items())
    return f"Trained on: {shown}.\n" if found else ""


def runs_table(runs: dict[str, list[Run]]) -> str:
    """Every run's own figures, so each mean above can be checked by hand."""
    head = ["arm", "seed", "steps", "wall time", *(m.title for m in METRICS)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for arm, rs in runs.items():
        for r in rs:
            wall = r.final("elapsed_s")
            time = "-" if wall is None else duration(wall)
            cells = [arm, str(r.seed), str(r.final("steps")), time]
            cells += ["-" if (v := m.value(r)) is None else f"{v:.{m.digits}f}" for m in METRICS]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _header(sweep: Sweep, out: Path, runs: dict[str, list[Run]]) -> str:
    budget = ", ".join(sweep.budget) or "each recipe's own train.max_steps"
    signatures = sorted(
        {
            str(r.result("bleu_signature"))
            for rs in runs.values()
            for r in rs
            if r.result("bleu_signature")
        }
    )
    signature = f" BLEU signature `{'`, `'.join(signatures)}`." if signatures else ""
    return (
        f"Sweep file `{sweep.path}`, runs in `{out}`: {len(sweep.arms)} arms x seeds "
        f"{list(sweep.seeds)}; budget {budget}; compared at the end of the budget "
        f"(axis: {sweep.compare_at}).\n\n"
        f"Which numbers: each run's validation loss, BLEU and chrF are those of its **last "
        f"validation record** in metrics.jsonl (the end of its budget; validation BLEU and "
        f"chrF are greedy, on the first train.valid_bleu_sentences validation pairs); test "
        f"BLEU and chrF are results.json's (the best checkpoint on the test split).{signature} "
        f"Per arm: mean ± sample standard deviation over seeds. Δ: the arm's mean minus the "
        f"baseline's, with two {LEVEL:.0%} intervals **paired by seed** on the seeds both "
        f"arms have: Student's paired t over seeds (Welch's t, labelled unpaired, when they "
        f"share no seed), and for test figures whose runs kept their translations, "
        f"Student's t over seeds and test sentences (n - 1 degrees of freedom on the seeds' "
        f"variance plus the test set's own), which counts both sources of noise "
        f"(the headline: whether it excludes 0). The tables describe; they call no arm "
        f"better or worse: a verdict is the plan's rule's, at its level and look, in the "
        f"verdict section alone. n=1: no interval.\n\n"
    )


def _by_arm(missing: list[tuple[str, int]]) -> str:
    """[("a", 3), ("a", 4), ("a", 5), ("b", 7)] -> "a seeds 3 to 5; b seed 7"."""
    seeds: dict[str, list[int]] = {}
    for arm, seed in missing:
        seeds.setdefault(arm, []).append(seed)
    parts = []
    for arm, found in seeds.items():
        runs: list[list[int]] = []
        for seed in sorted(found):
            if runs and seed == runs[-1][-1] + 1:
                runs[-1].append(seed)
            else:
                runs.append([seed])
        shown = [f"{r[0]} to {r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs]
        parts.append(f"{arm} seed{'s' * (len(found) > 1)} {', '.join(shown)}")
    return "; ".join(parts)


def _interim(sweep: Sweep, missing: list[tuple[str, int]]) -> str:
    planned = len(sweep.arms) * len(sweep.seeds)
    looks = sweep.rule.looks
    when = (
        f"at its planned looks ({', '.join(map(str, looks))} seeds), each at its "
        f"group-sequential level"
        if looks
        else "once, when every planned run is in"
    )
    return (
        f"Not finished ({len(missing)} of {planned}), left out: {_by_arm(missing)}. The "
        f"verdicts below come only at a planned look: the "
        f"sweep is read {when}; a sweep stopped at the first look that clears an unadjusted "
        f"level calls false differences more often than that level.\n"
    )


def _plan_section(
    sweep: Sweep, runs: dict[str, list[Run]], book: Book | None, accept: bool
) -> tuple[str, list, str | None]:
    """(the Plan section, the readings to render verdicts under, why none is given)."""
    if book is None:
        text = "## Plan\n\nNo plan was recorded with these runs: **no verdict**.\n"
        return text, [], "no plan recorded"
    found = disclose(book, plan_of(sweep), [r for rs in runs.values() for r in rs], accept)
    held = "the plan changed: see Plan" if found.changed and not accept else None
    return found.text, list(found.readings), held


def render(
    sweep: Sweep,
    out: Path,
    plots: list[Path],
    robustness: str | None,
    power: str | None = None,
    book: Book | None = None,
    accept: bool = False,
) -> str:
    """The report's Markdown; `book`: the plan recorded before the first run and its
    changes (none: no verdict), `accept`: --plan-changed."""
    runs, missing = collect(sweep, out)  # read again: cheap, and render stands alone
    plan, readings, held = _plan_section(sweep, runs, book, accept)
    parts = [f"# Sweep {sweep.name}\n", plan, _header(sweep, out, runs)]
    parts[-1] += validation_note([r for rs in runs.values() for r in rs])
    if missing:
        parts.append(_interim(sweep, missing))
    parts.append("## Arms\n\n" + arms_table(sweep, runs) + "\n" + machines(runs))
    parts.append("## Results\n")
    parts += [t for m in METRICS if (t := metric_table(sweep.baseline, runs, m))]
    if len(runs) > 1:
        parts.append(paired_section(sweep.baseline, runs, readings, held))
    if power is not None:
        parts.append(f"## Power\n\nFrom this sweep's finished runs (`t2 sweep --plan`): {power}\n")
    if robustness is not None:
        parts.append(
            f"## Robustness (report 003)\n\nThe best checkpoint of each run on the first "
            f"{SENTENCES} validation pairs, sources perturbed (t2 robustness): the clean "
            f"control, then the change under each perturbation; mean ± sd over seeds.\n\n"
            f"{robustness}"
        )
    parts.append("## Runs\n\n" + runs_table(runs))
    if plots:
        shown = [f"![{p.stem}]({p.relative_to(out)})\n\n" for p in plots]
        parts.append("## Curves\n\n" + "".join(shown))
    return "\n".join(parts)


def write_report(
    sweep: Sweep,
    out: Path,
    device: str,
    power: str | None = None,
    book: Book | None = None,
    accept: bool = False,
) -> Path:
    """OUT/report.md, with the curves (one colour per arm) in OUT/plots/ and, given, the
    power plan's text from the same runs (t2.experiments.decisions.planning) and the plan record."""
    runs, _ = collect(sweep, out)
    groups = {arm: [r.path for r in rs] for arm, rs in runs.items() if rs}
    plots = plot_curves(groups, out / "plots") if groups else []
    suffix = {"steps": "step", "tokens": "tokens", "time": "time"}[sweep.compare_at]
    first = [p for p in plots if p.stem == f"curves_by_{suffix}"]
    plots = first + [p for p in plots if p not in first]
    robustness = robustness_tables(runs, device) if sweep.robustness else None
    path = out / "report.md"
    write_text(path, render(sweep, out, plots, robustness, power, book, accept))
    return path
