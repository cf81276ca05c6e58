"""The decision rule a sweep was planned under, recorded with its first run, and every
change to it since: FOLDER/rule.json beside the runs (the --records folder when given).

    {"planned": {"rule": {...}, "hash": "...", "runs": 0, "note": ""},
     "changes": [{"rule": {...}, "hash": "...", "after_runs": 30, "note": ""}]}

The sweep writes it before it trains (runs: the finished runs then, 0 for a new sweep).
When the sweep file later states another rule, the report renders the verdict under the
planned rule only; `t2 sweep --rule-changed` renders it under the new one too, records the
change with the number of runs finished by then, and the report says "decision rule
changed after N runs". A rule changed after the data were seen can be chosen to fit them;
the report shows every verdict so a reader can judge.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from t2.atomic import atomic_text
from t2.errors import ConfigError
from t2.experiments.rule import Rule

FILE = "rule.json"


@dataclass(frozen=True)
class Change:
    rule: Rule
    after_runs: int
    note: str = ""


@dataclass(frozen=True)
class Rulebook:
    planned: Rule
    runs: int  # finished runs when the planned rule was recorded
    changes: tuple[Change, ...] = ()
    note: str = ""

    def knows(self, rule: Rule) -> bool:
        return rule == self.planned or any(c.rule == rule for c in self.changes)


def _rule(raw: dict[str, Any], path: Path) -> Rule:
    rule = Rule(**raw["rule"])
    if rule.digest() != raw.get("hash"):
        raise ConfigError(f"{path}: a rule's hash does not match its fields; restore the file")
    return rule


def read_rulebook(folder: Path) -> Rulebook | None:
    path = Path(folder) / FILE
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        planned = raw["planned"]
        changes = tuple(
            Change(_rule(c, path), int(c["after_runs"]), c.get("note", ""))
            for c in raw.get("changes", [])
        )
        return Rulebook(
            _rule(planned, path), int(planned["runs"]), changes, planned.get("note", "")
        )
    except (ValueError, KeyError, TypeError) as err:
        raise ConfigError(f"{path} is not a decision-rule record ({err}); restore it") from None


def write_rulebook(folder: Path, book: Rulebook) -> None:
    def entry(rule: Rule, **more: Any) -> dict[str, Any]:
        return {"rule": asdict(rule), "hash": rule.digest(), **more}

    data = {
        "planned": entry(book.planned, runs=book.runs, note=book.note),
        "changes": [entry(c.rule, after_runs=c.after_runs, note=c.note) for c in book.changes],
    }
    Path(folder).mkdir(parents=True, exist_ok=True)
    with atomic_text(Path(folder) / FILE) as f:
        f.write(json.dumps(data, indent=2) + "\n")


def settle(folder: Path, current: Rule, finished: int, accept: bool) -> Rulebook:
    """`folder`'s rulebook: written with `current` as the planned rule if it has none;
    with `accept`, a rule it does not know is recorded as a change after `finished` runs."""
    book = read_rulebook(folder)
    if book is None:
        book = Rulebook(current, finished)
        write_rulebook(folder, book)
    elif accept and not book.knows(current):
        book = replace(book, changes=(*book.changes, Change(current, finished)))
        write_rulebook(folder, book)
    return book


def rules_to_render(book: Rulebook, current: Rule, accept: bool) -> list[tuple[str, Rule]]:
    """(label, rule) for every verdict the report shows, the one that applies last: the
    planned rule; with `accept`, each recorded change, the sweep file's last."""
    rules = [("planned rule", book.planned)]
    if current == book.planned or not accept:
        return rules
    rules += [(f"rule changed after {c.after_runs} runs", c.rule) for c in book.changes]
    if not book.changes or book.changes[-1].rule != current:  # not (yet) recorded
        rules.append(("the sweep file's rule", current))
    return rules


def rule_section(book: Rulebook, current: Rule, accept: bool) -> str:
    """The report's account of the rule: planned, every change, and what is rendered."""
    when = "before the first run" if not book.runs else f"after {book.runs} runs had finished"
    lines = [f"## Decision rule\n\nPlanned, recorded {when}: {book.planned.describe()}."]
    if book.note:
        lines.append(f"({book.note})")
    for c in book.changes:
        note = f" ({c.note})" if c.note else ""
        changed = f"**Decision rule changed after {c.after_runs} runs**"
        lines.append(f"\n{changed}: now {c.rule.describe()}.{note}")
    if current != book.planned and not accept:
        lines.append(
            f"\nThe sweep file states another rule ({current.describe()}): no verdict under "
            f"it; `t2 sweep --rule-changed` renders one and records the change."
        )
    return "\n".join(lines) + "\n"
