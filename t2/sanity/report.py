"""The sanity suite's table: Markdown (printed, and OUT/sanity.md) and CSV (OUT/sanity.csv),
written from the outcomes, which come from the runs' own results.json."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from t2.atomic import atomic_text
from t2.sanity.combos import AXES
from t2.sanity.suite import Outcome

CSV_FIELDS = (
    "combination",
    *AXES,
    "task",
    "pass_mark",
    "valid_reached",
    "test_exact_match",
    "test_sentences",
    "steps",
    "stopped_by",
    "train_seconds",
    "status",
    "note",
)
NOISE = (
    "* under the mark on the test split, but within 3 standard errors of it: validation "
    "reached the mark, and the test figure agrees within sampling noise"
)


def _cell(o: Outcome, notes: list[str]) -> str:
    """`100.0% @ 700` for a pass; the status first otherwise, with a footnote for reasons."""
    note = o.note
    if note and note not in notes:
        notes.append(note)
    ref = f" [{notes.index(note) + 1}]" if note else ""
    if o.error:
        return f"ERROR{ref}"
    figure = f"{100 * o.exact_match:.1f}% @ {o.steps}" if o.exact_match is not None else "-"
    if o.status == "pass":
        return (figure.replace("%", "%*", 1) if o.exact_match < o.mark else figure) + ref
    return f"{o.status}{ref}: {figure}"


def markdown(outcomes: list[Outcome]) -> str:
    """Combinations down, tasks across; each cell the test exact match @ steps trained."""
    tasks = list(dict.fromkeys(o.task for o in outcomes))
    combos = list(dict.fromkeys(o.combo for o in outcomes))
    cells = {(o.combo, o.task): o for o in outcomes}
    marks = ", ".join(f"{t} {100 * cells[combos[0], t].mark:.0f}%" for t in tasks)
    notes: list[str] = []
    lines = [
        f"| combination | components | {' | '.join(tasks)} |",
        f"| --- | --- |{' --- |' * len(tasks)}",
    ]
    for combo in combos:
        row = [_cell(cells[combo, t], notes) if (combo, t) in cells else "" for t in tasks]
        lines.append(f"| {combo.label} | {' '.join(combo.values())} | {' | '.join(row)} |")
    bad = [o for o in outcomes if not o.ok]
    seconds = sum(o.seconds or 0.0 for o in outcomes)
    lines += [
        "",
        f"Cells: exact match on the test split @ steps trained. Pass marks: {marks}, reached on "
        f"validation within train.max_steps and confirmed on the test split (docs/sanity.md).",
        f"{len(outcomes) - len(bad)} of {len(outcomes)} trainings as expected; "
        f"{len(bad)} failed; training time {seconds / 60:.1f} min in all.",
    ]
    if any(o.status == "pass" and (o.exact_match or 0) < o.mark for o in outcomes):
        lines.append(NOISE)
    lines += [f"[{i}] {note}" for i, note in enumerate(notes, 1)]
    return "\n".join(lines) + "\n"


def csv_text(outcomes: list[Outcome]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    for o in outcomes:
        em = "" if o.exact_match is None else f"{o.exact_match:.4f}"
        seconds = "" if o.seconds is None else f"{o.seconds:.1f}"
        writer.writerow(
            [
                o.combo.label,
                *o.combo.values(),
                o.task,
                o.mark,
                o.stopped_by == "stop_exact_match",
                em,
                o.sentences or "",
                o.steps or "",
                o.stopped_by,
                seconds,
                o.status,
                o.note,
            ]
        )
    return out.getvalue()


def write_reports(outcomes: list[Outcome], out: Path) -> tuple[Path, Path]:
    """OUT/sanity.md and OUT/sanity.csv, each written whole or not at all (t2.atomic)."""
    out.mkdir(parents=True, exist_ok=True)
    paths = (out / "sanity.md", out / "sanity.csv")
    for path, text in zip(paths, (markdown(outcomes), csv_text(outcomes)), strict=True):
        with atomic_text(path) as f:
            f.write(text)
    return paths
