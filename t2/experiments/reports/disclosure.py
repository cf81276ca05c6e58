"""The top of a sweep's report: the plan as recorded (t2.experiments.decisions.planbook), every
change to it since, how the sweep file differs from the last recorded plan, and which plan
each run trained under (the hash its meta.json carries).

Any difference (a change recorded since the plan, a sweep file that states another plan,
a run trained under another plan or under none) is disclosed here, and the report then
gives no verdict unless `t2 sweep --plan-changed` asks for one; with it, a verdict under
each plan, the planned one first (it heads each arm's verdict), so a reader sees whether the
change moved it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from t2.experiments.decisions.plan import Plan, differences
from t2.experiments.decisions.planbook import Book, Entry
from t2.experiments.decisions.readings import Reading
from t2.experiments.sweeps.runs import Run


@dataclass(frozen=True)
class Disclosure:
    text: str  # the report's Plan section
    changed: bool  # something differs from the plan: no verdict without --plan-changed
    readings: tuple[Reading, ...]  # what verdicts are rendered under: the plan first, then changes


def _reading(label: str, plan: Plan) -> Reading:
    return Reading(label, plan.rule, plan.seeds, plan.baseline, tuple(plan.arms))


def _change(entry: Entry, before: Plan) -> str:
    runs = "an unrecorded number of" if entry.started is None else str(entry.started)
    what = "; ".join(differences(before, entry.plan)) or "no field changed"
    note = f" ({entry.note})" if entry.note else ""
    return (
        f"**Plan changed after {runs} runs had started** (hash `{entry.digest}`, "
        f"{entry.when(first=False)}): {what}.{note}"
    )


def _runs_line(book: Book, runs: list[Run]) -> tuple[str, bool]:
    """Which plan each run trained under; whether every one trained under the plan."""
    found = Counter(r.plan for r in runs)
    parts = []
    for digest, count in found.items():
        index = None if digest is None else book.find(digest)
        if digest is None:
            what = "record no plan (trained before t2 recorded plans, or outside its sweep)"
        elif index == 0:
            what = f"trained under the plan (`{digest}`)"
        elif index is not None:
            what = f"trained under change {index} (`{digest}`)"
        else:
            what = f"trained under a plan `{digest}` that plan.json does not hold"
        parts.append(f"{count} {what}")
    planned = found.get(book.planned.digest, 0) == len(runs)
    return f"Runs (meta.json): {'; '.join(parts) or 'none finished'}.", planned


def disclose(book: Book, now: Plan, runs: list[Run], accept: bool) -> Disclosure:
    """The Plan section for `book` against the sweep file's plan `now` and the finished
    runs; with `accept` (--plan-changed) verdicts under every plan, else only when
    nothing differs."""
    first = book.planned
    note = f" ({first.note})" if first.note else ""
    told = f"The plan (hash `{first.digest}`), {first.when()}: {first.plan.describe()}."
    lines = [f"## Plan\n\n{told}{note}"]
    readings = [_reading("planned", first.plan)]
    for i, entry in enumerate(book.entries[1:], 1):
        lines.append(_change(entry, book.entries[i - 1].plan))
        readings.append(_reading(f"change {i}", entry.plan))
    unrecorded = differences(book.current.plan, now)
    if unrecorded:
        lines.append(
            f"**The sweep file states another plan** (hash `{now.digest()}`), not recorded: "
            f"{'; '.join(unrecorded)}."
        )
        readings.append(_reading("the sweep file's plan", now))
    runs_line, all_planned = _runs_line(book, runs)
    lines.append(runs_line)
    changed = len(book.entries) > 1 or bool(unrecorded) or not all_planned
    if changed and not accept:
        lines.append(
            "**No verdict**: what ran is not the plan (above). `t2 sweep --plan-changed` "
            "renders the verdict under each plan, the planned one first, and records the "
            "sweep file's plan as a change."
        )
    elif changed:
        lines.append(
            "Verdicts under each plan follow (`--plan-changed`): the planned one first, and "
            "it heads each arm; each later one is labelled chosen after the data, since a plan "
            "changed after the data were seen can be chosen to fit them."
        )
    return Disclosure("\n\n".join(lines) + "\n", changed, tuple(readings))
