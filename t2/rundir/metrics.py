"""RUN/metrics.jsonl: one JSON record per logged step and per validation, appended as a
run goes. Its one reader and its one rewriter live here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from t2.atomic import atomic_text
from t2.errors import CheckpointError


def read_records(path: Path) -> list[dict[str, Any]]:
    """The file's records. A last line cut off by a process killed mid-append is left out;
    a bad line before the last means the file was damaged: one line saying so."""
    if not path.is_file():
        return []
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    records = []
    for i, line in enumerate(lines):
        try:
            records.append(json.loads(line))
        except ValueError:
            if i == len(lines) - 1:
                break
            raise CheckpointError(
                f"{path} line {i + 1} is not JSON: the log is damaged; restore it or start a "
                f"new run"
            ) from None
    return records


def rewrite_records(path: Path, records: list[dict[str, Any]]) -> None:
    """Replace the file by `records`, whole or not at all (written beside it, then renamed)."""
    with atomic_text(path) as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
