"""A sweep's plan as recorded, and every change to it since: FOLDER/plan.json beside the
runs (the --records folder when given), owned here.

    {"format": 1,
     "plans": [{"plan": {...}, "hash": "...", "recorded": "2026-11-28T09:00:00Z",
                "started": 0, "finished": 0, "reconstructed": false, "note": ""},
               ...]}

The first entry is the plan; each later one a change, recorded by `t2 sweep
--plan-changed`. `started` and `finished` count the sweep's runs that had begun (or
finished) when the entry was recorded: a plan recorded with none started was recorded
before the first run. A plan written by hand after the runs, from their history, is
`reconstructed`; its counts may be unknown (null), and the report never calls it recorded
before the first run. A hash that does not match its plan (an entry edited by hand) stops
the command in one line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from t2.atomic import atomic_text
from t2.errors import ConfigError
from t2.experiments.decisions.plan import Plan, plan_from_dict

FILE = "plan.json"
FORMAT = 1
OLD_FILE = "rule.json"  # the decision-rule record before plans


@dataclass(frozen=True)
class Entry:
    plan: Plan
    recorded: str  # when, ISO 8601 UTC
    started: int | None  # runs begun when it was recorded (None: not known)
    finished: int | None
    reconstructed: bool = False
    note: str = ""

    @property
    def digest(self) -> str:
        return self.plan.digest()

    def when(self, first: bool = True) -> str:
        """How the report says when the entry was written (`first`: as the plan, else as
        a change of it)."""
        day = self.recorded[:16].replace("T", " ") + " UTC"
        if not first:
            how = "**reconstructed after the fact**" if self.reconstructed else "recorded"
            return f"{how} on {day}"
        if self.reconstructed:
            runs = "" if self.started is None else f", after {self.started} runs had started"
            return f"**reconstructed after the fact** on {day}{runs}, not recorded before the runs"
        if not self.started:
            return f"recorded by t2 sweep before the first run, on {day}"
        return (
            f"recorded on {day}, after {self.started} runs had started ({self.finished} "
            f"finished): **not before the first run**"
        )


@dataclass(frozen=True)
class Book:
    entries: tuple[Entry, ...]

    @property
    def planned(self) -> Entry:
        return self.entries[0]

    @property
    def current(self) -> Entry:
        return self.entries[-1]

    def find(self, digest: str) -> int | None:
        """The index of the entry with this hash, if any."""
        return next((i for i, e in enumerate(self.entries) if e.digest == digest), None)


def _entry(raw: dict[str, Any], path: Path) -> Entry:
    plan = plan_from_dict(raw["plan"])
    if plan.digest() != raw.get("hash"):
        raise ConfigError(f"{path}: a plan's hash does not match its fields; restore the file")
    return Entry(
        plan,
        str(raw["recorded"]),
        raw.get("started"),
        raw.get("finished"),
        bool(raw.get("reconstructed", False)),
        str(raw.get("note", "")),
    )


def read_book(folder: Path) -> Book | None:
    """`folder`'s plan record; None where there is none."""
    path = Path(folder) / FILE
    if not path.is_file():
        if (Path(folder) / OLD_FILE).is_file():
            raise ConfigError(
                f"{Path(folder) / OLD_FILE} records a decision rule in the form before plans; "
                f"write its plan as {path} (docs/experiments.md) or move it away"
            )
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if raw.get("format") != FORMAT:
            raise ValueError(f"format {raw.get('format')!r}, this t2 reads {FORMAT}")
        entries = tuple(_entry(e, path) for e in raw["plans"])
        if not entries:
            raise ValueError("no plan")
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise ConfigError(f"{path} is not a sweep plan record ({err}); restore it") from None
    return Book(entries)


def write_book(folder: Path, book: Book) -> None:
    entries = [
        {
            "plan": e.plan.to_dict(),
            "hash": e.digest,
            "recorded": e.recorded,
            "started": e.started,
            "finished": e.finished,
            "reconstructed": e.reconstructed,
            "note": e.note,
        }
        for e in book.entries
    ]
    Path(folder).mkdir(parents=True, exist_ok=True)
    with atomic_text(Path(folder) / FILE) as f:
        f.write(json.dumps({"format": FORMAT, "plans": entries}, indent=2) + "\n")


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def settle(folder: Path, plan: Plan, started: int, finished: int, accept: bool) -> Book:
    """`folder`'s plan record: `plan` recorded as the plan if there is none; with
    `accept` (--plan-changed), recorded as a change when it is not the current plan."""
    book = read_book(folder)
    if book is None:
        book = Book((Entry(plan, now(), started, finished),))
        write_book(folder, book)
    elif accept and plan.digest() != book.current.digest:
        book = Book((*book.entries, Entry(plan, now(), started, finished)))
        write_book(folder, book)
    return book
