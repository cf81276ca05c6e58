"""What a run's own files say about one of its checkpoints, for its model card: meta.json,
metrics.jsonl, results.json and the eval-*/scores.json beside the checkpoint."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from t2.errors import CheckpointError
from t2.rundir.layout import RunDir, evaluations, read_meta
from t2.rundir.metrics import read_records


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise CheckpointError(f"cannot read {path} ({err}); fix or remove it") from None


@dataclass
class RunFacts:
    """What the run's files say about one checkpoint."""

    ckpt: Path
    step: int | None = None
    averaged: list[str] = field(default_factory=list)
    ckpt_meta: dict[str, Any] = field(default_factory=dict)
    run_meta: dict[str, Any] = field(default_factory=dict)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    results: dict[str, Any] | None = None
    evals: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def read(cls, ckpt: Path) -> RunFacts:
        meta = read_meta(ckpt)
        facts = cls(Path(ckpt), meta.get("step"), list(meta.get("averaged", [])), meta)
        facts.evals = [_json(p) for p in evaluations(ckpt)]
        run = RunDir.of(ckpt)
        if not run.config.is_file():  # a self-contained folder (t2 average --out)
            return facts
        facts.run_meta = read_meta(run.path)
        if run.metrics.is_file():
            facts.metrics = read_records(run.metrics)
        if run.results.is_file():
            results = _json(run.results)
            if Path(str(results.get("checkpoint", ""))).name == Path(ckpt).name:
                facts.results = results  # only the scores of this very checkpoint
        return facts

    def at_step(self, key: str) -> dict[str, Any] | None:
        """The last record up to this checkpoint's step that has `key`."""
        if self.step is None:
            return None
        found = [r for r in self.metrics if key in r and r.get("step", 0) <= self.step]
        return found[-1] if found else None
