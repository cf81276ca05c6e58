"""`t2 compare`: runs side by side in one table (Markdown and CSV), and their curves.

A row per run: recipe, seed, the config keys where the runs differ, parameters, where
training ended (steps, target tokens, wall time, tokens/s, the rule that stopped it), the
best validation loss and BLEU in metrics.jsonl, the test BLEU and chrF of results.json, and
the machine it trained on (meta.json). A figure a run lacks (older runs have no
train_tokens, elapsed_s or machine) shows as "-".
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from t2.atomic import atomic_text
from t2.config import Config
from t2.data.config import TEST_IS_VALID, same_split
from t2.experiments.reports.paired import paired_section
from t2.experiments.reports.plots import plot_curves
from t2.experiments.sweeps.runs import Run, flatten

# keys that differ between runs without making them different experiments
IGNORED = frozenset({"train.seed", "train.wandb_name", "train.sweep_plan", "model.vocab_size"})


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _defaults() -> dict[str, Any]:
    """Today's defaults, for keys that an older run's config.yaml does not name."""

    return flatten(Config().to_dict())


def differing_keys(runs: Sequence[Run]) -> list[str]:
    """Config keys whose values are not the same in every run (seed and bookkeeping aside)."""
    defaults = _defaults()
    keys = sorted(set().union(*(r.config for r in runs)) - IGNORED)
    return [k for k in keys if len({_hashable(r.config.get(k, defaults.get(k))) for r in runs}) > 1]


def _rate(run: Run) -> float | None:
    tokens, seconds = run.final("train_tokens"), run.final("elapsed_s")
    return tokens / seconds if tokens is not None and seconds else None


# (header, value of a run, Markdown format of a value); CSV writes the values unformatted
FIGURES: list[tuple[str, Callable[[Run], Any], Callable[[Any], str]]] = [
    ("parameters", lambda r: r.parameters, lambda v: count(v)),
    ("steps", lambda r: r.final("steps"), lambda v: f"{v:,}"),
    ("train tokens", lambda r: r.final("train_tokens"), lambda v: count(v)),
    ("wall time", lambda r: r.final("elapsed_s"), lambda v: duration(v)),
    ("tokens/s", _rate, lambda v: f"{v:,.0f}"),
    ("stopped by", lambda r: r.result("stopped_by"), str),
    ("best valid loss", lambda r: r.best_valid("valid_loss", True), lambda v: f"{v:.4f}"),
    ("best valid BLEU", lambda r: r.best_valid("valid_bleu", False), lambda v: f"{v:.2f}"),
    ("test BLEU", lambda r: r.result("bleu"), lambda v: f"{v:.2f}"),
    ("test chrF", lambda r: r.result("chrf"), lambda v: f"{v:.2f}"),
    ("machine", lambda r: r.machine, str),  # wall time and tokens/s are this machine's
]


def count(n: int) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n:,}"


def duration(seconds: float) -> str:
    """12.3s, 4m 05s, 2h 03m."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}m {secs:02d}s" if minutes < 60 else f"{minutes // 60}h {minutes % 60:02d}m"


def table(runs: Sequence[Run], names: Sequence[str] | None = None) -> tuple[list[str], list[list]]:
    """Headers and one row of raw values per run (None where a run lacks the figure)."""
    keys, defaults = differing_keys(runs), _defaults()
    headers = ["run", "recipe", "seed", *keys, *(h for h, _, _ in FIGURES)]
    rows = []
    for i, run in enumerate(runs):
        row = [names[i] if names else str(run.path), run.recipe, run.seed]
        row += [run.config.get(k, defaults.get(k)) for k in keys]
        rows.append(row + [value(run) for _, value, _ in FIGURES])
    return headers, rows


def _cell(value: Any, fmt: Callable[[Any], str] | None) -> str:
    if value is None:
        return "-"
    if value == "":
        return '""'  # an empty setting (e.g. train.wandb_group: the recipe's name)
    text = fmt(value) if fmt else str(value)
    return text.replace("|", "\\|")


def markdown(headers: list[str], rows: list[list]) -> str:
    formats = {h: f for h, _, f in FIGURES}
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        cells = [_cell(v, formats.get(h)) for h, v in zip(headers, row, strict=True)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def to_csv(headers: list[str], rows: list[list]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(headers)
    writer.writerows([["" if v is None else v for v in row] for row in rows])
    return out.getvalue()


def group_runs(runs: Sequence[Run]) -> dict[str, list[Path]]:
    """Runs that differ only in their seed form a group, named by its recipe (and by the
    keys where it differs from the others when several groups share the recipe)."""
    keys = [k for k in differing_keys(runs) if k not in IGNORED]
    defaults = _defaults()
    groups: dict[tuple, list[Run]] = {}
    for run in runs:
        values = tuple(_hashable(run.config.get(k, defaults.get(k))) for k in keys)
        groups.setdefault((run.recipe, values), []).append(run)
    recipes = [recipe for recipe, _ in groups]
    named = {}
    for (recipe, values), members in groups.items():
        label = recipe
        if recipes.count(recipe) > 1:
            label += " " + ", ".join(f"{k}={v}" for k, v in zip(keys, values, strict=True))
        named[label] = [r.path for r in members]
    return named


def scored_on_validation(run: Run) -> bool:
    """The run's test split is its validation split (t2.data.config.TEST_IS_VALID)."""
    return same_split(str(run.config.get("data.valid")), str(run.config.get("data.test")))


def validation_note(runs: Sequence[Run]) -> str:
    """ "test = validation" and what it means, for the runs whose test split is their
    validation split; empty when there are none."""
    found = [r for r in runs if scored_on_validation(r)]
    if not found:
        return ""
    sources = ", ".join(sorted({str(r.config["data.test"]) for r in found}))
    return (
        f"**test = validation** in {len(found)} of {len(runs)} runs (data.test = data.valid "
        f"= {sources}): {TEST_IS_VALID}.\n"
    )


def write_text(path: Path, text: str) -> None:
    """Write atomically: a reader never sees half a file."""
    with atomic_text(path) as f:
        f.write(text)


# runs compared without a sweep's plan: no rule was written before them, so no verdict
NO_PLAN = "no plan: no verdict; `t2 sweep` decides under a rule recorded before its runs"


def compare(runs: Sequence[Run], out_dir: Path, names: Sequence[str] | None = None) -> str:
    """Write OUT/compare.md, compare.csv and the curve plots; return the Markdown table
    and, with two settings or more, their intervals and paired significance against the
    first run's setting (seeds paired by train.seed), under no verdict (NO_PLAN)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    headers, rows = table(runs, names)
    text = markdown(headers, rows)
    groups = group_runs(runs)
    if len(groups) > 1:
        by_path = {r.path: r for r in runs}
        settings = {label: [by_path[p] for p in paths] for label, paths in groups.items()}
        text += "\n" + paired_section(next(iter(groups)), settings, [], NO_PLAN)
    plots = plot_curves(groups, out_dir)
    figures = "".join(f"\n![{p.stem}]({p.name})\n" for p in plots)
    note = (
        "Best valid loss and BLEU: over every validation in metrics.jsonl; test BLEU "
        "and chrF: results.json (the best checkpoint on the test split); wall time: "
        "training, validation and checkpoints, cumulative over resumes.\n"
    )
    tested = validation_note(runs)
    write_text(out_dir / "compare.md", f"# Runs compared\n\n{text}\n{tested}{note}{figures}")
    write_text(out_dir / "compare.csv", to_csv(headers, rows))
    return text
