"""A run directory read for comparison: its config, recipe, metrics records and results.

Only the run's own files are read (config.yaml, meta.json, metrics.jsonl, results.json and
the safetensors header of one checkpoint); no model is built, so a summary takes
milliseconds. A run's records without its checkpoints (t2 sweep --records) read alike.
What older runs lack (train_tokens, elapsed_s, stopped_by, machine, the sweep plan's hash)
reads as None. A run's test references are read from its data.test and checked against the
SHA-256 its meta.json names (t2.data.references): `test_references` is the one reader of
them; a run from before t2 named them reads the copy it kept (RUN/test.refs.txt).
"""

from __future__ import annotations

import functools
import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from t2.config import load_yaml
from t2.data.config import DataConfig
from t2.data.references import split_named, split_references
from t2.errors import CheckpointError, DataError
from t2.rundir import RunDir, read_meta, read_records
from t2.rundir.layout import WEIGHTS, read_written_lines


@dataclass(frozen=True)
class Run:
    """What a run directory says about its training, read once."""

    path: Path
    recipe: str
    config: dict[str, Any]  # flat: "model.d_model" -> 512
    records: list[dict[str, Any]]  # metrics.jsonl, in order
    results: dict[str, Any] | None  # results.json; None while the run is unfinished
    parameters: int | None  # the best checkpoint's tensor shapes, else results.json's
    machine: str | None  # meta.json's: the device it (last) trained on (t2.machine)
    plan: str | None = None  # meta.json's: the hash of the sweep plan it trained under
    references: dict[str, str] | None = None  # meta.json's: split -> SHA-256 of its references

    @property
    def finished(self) -> bool:
        return self.results is not None

    @property
    def seed(self) -> Any:
        return self.config.get("train.seed")

    @property
    def train_records(self) -> list[dict[str, Any]]:
        return [r for r in self.records if "loss" in r]

    @property
    def valid_records(self) -> list[dict[str, Any]]:
        return [r for r in self.records if "valid_loss" in r]

    def last_valid(self, key: str) -> float | None:
        """`key` of the last validation record: the run's figure at the end of its budget."""
        found = self.valid_records
        return found[-1].get(key) if found else None

    def best_valid(self, key: str, lower_is_better: bool) -> float | None:
        values = [r[key] for r in self.valid_records if _number(r.get(key))]
        if not values:
            return None
        return min(values) if lower_is_better else max(values)

    def final(self, key: str) -> Any:
        """steps / train_tokens / elapsed_s at the end: results.json's, else the last record's."""
        if self.results and key in self.results:
            return self.results[key]
        name = "step" if key == "steps" else key
        found = [r[name] for r in self.records if name in r]
        return found[-1] if found else None

    def result(self, key: str) -> Any:
        return (self.results or {}).get(key)

    def test_outputs(self) -> tuple[list[str], list[str]] | None:
        """The best checkpoint's test translations and their references, a line each;
        None for a run without them, or whose references cannot be confirmed
        (`outputs_problem` says why)."""
        found = self._outputs
        return found if isinstance(found, tuple) else None

    def outputs_problem(self) -> str | None:
        """Why a run with test translations has no test outputs to compare, in a few
        words; None when it has them, or has no translations at all."""
        found = self._outputs
        return found if isinstance(found, str) else None

    @functools.cached_property
    def _outputs(self) -> tuple[list[str], list[str]] | str | None:
        """The test outputs, read and checked once (test_references), or why not: a run
        cut off while scored (no results.json) or whose test set changed is left out of
        the comparisons in words, not read against other sentences nor stopping them."""
        run = RunDir(self.path)
        if not run.test_hyps.is_file():
            return None
        if not self.finished:
            return "not finished (no results.json): its test translations may be partial"
        try:
            refs = test_references(self.path, self.config, self.references)
        except DataError as err:
            return str(err).removeprefix(f"{self.path}: ")
        return None if refs is None else (read_written_lines(run.test_hyps), refs)


def test_references(
    path: Path, config: dict[str, Any], references: dict[str, str] | None
) -> list[str] | None:
    """A run's test references: read from its data.test and checked against the SHA-256
    its meta.json names of them and of their source sentences (a one-line DataError when
    either differs, or when data.test is not here); an older run's kept copy
    (RUN/test.refs.txt) where meta.json names none; else None."""
    run = RunDir(path)
    if references is None or "test" not in references:
        return read_written_lines(run.test_refs) if run.test_refs.is_file() else None
    section = {k.split(".", 1)[1]: v for k, v in config.items() if k.startswith("data.")}
    known = DataConfig.__dataclass_fields__
    cfg = DataConfig(**{k: v for k, v in section.items() if k in known})
    seed = int(config.get("train.seed", 0))
    try:
        today = split_named(cfg, "test", seed)
    except DataError as err:
        raise DataError(
            f"{path}: its test set data.test={cfg.test} cannot be read from {Path.cwd()} "
            f"({err}); a report reads the references from it: run from the folder the run "
            f"was trained from, or restore the test set"
        ) from None
    for key in ("test", "test_source"):
        if key in references and today[key] != references[key]:
            side = "source sentences" if key == "test_source" else "references"
            raise DataError(
                f"{path}: data.test={cfg.test} holds other {side} than the run was scored "
                f"on (SHA-256 {today[key][:12]}, meta.json: {references[key][:12]}); restore "
                f"the test set the run was scored on"
            )
    return list(split_references(cfg, "test", seed))


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def flatten(config: dict[str, Any]) -> dict[str, Any]:
    """{"model": {"d_model": 512}} -> {"model.d_model": 512}."""
    return {
        f"{section}.{key}": value
        for section, values in config.items()
        if isinstance(values, dict)
        for key, value in values.items()
    }


def checkpoint_parameters(ckpt: Path) -> int:
    """Elements of every tensor in a checkpoint's safetensors header (tied matrices are
    stored once; positional tables are not stored), without reading the weights."""
    with (ckpt / WEIGHTS).open("rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
    return sum(math.prod(t["shape"]) for name, t in header.items() if name != "__metadata__")


def read_run(path: str | Path) -> Run:
    """A run directory's summary; one line naming the folder if it is not a run."""
    run = RunDir(path)
    if not run.config.is_file():
        raise CheckpointError(
            f"{run.path} is not a run directory (no config.yaml); pass folders written by t2 train"
        )
    meta = read_meta(run.path)
    try:
        config = flatten(load_yaml(run.config.read_text(encoding="utf-8")) or {})
        text = run.results.read_text(encoding="utf-8") if run.results.is_file() else None
        results = json.loads(text) if text is not None else None
    except (ValueError, yaml.YAMLError) as err:
        reason = str(err).strip().splitlines()[0]
        raise CheckpointError(f"{run.path}: unreadable config or results ({reason})") from None
    recipe = meta.get("recipe") or (results or {}).get("recipe") or "-"  # format 1: none
    ckpt = run.best() or run.latest()
    params = checkpoint_parameters(ckpt) if ckpt else (results or {}).get("parameters")
    records = read_records(run.metrics)
    machine, plan, refs = meta.get("machine"), meta.get("sweep_plan"), meta.get("references")
    return Run(run.path, str(recipe), config, records, results, params, machine, plan, refs)
