"""Names, format version and lookup of a run directory's parts (the layout: t2/rundir/__init__)."""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import torch

from t2 import __version__
from t2.atomic import atomic_text
from t2.data.lines import one_line
from t2.errors import CheckpointError, ConfigError

FORMAT = 2  # written by this t2; format 1 (t2 0.1) had no meta.json and a per-process position
FIRST_READABLE = 1  # the oldest format whose weights this t2 loads
FIRST_RESUMABLE = 2  # the oldest format whose training state this t2 resumes

CONFIG, META, TOKENIZER, CHECKPOINTS = "config.yaml", "meta.json", "tokenizer", "checkpoints"
WEIGHTS, STATE, COMPLETE, BEST = "model.safetensors", "training_state.pt", "COMPLETE", "best"
METRICS, RESULTS, LOCK = "metrics.jsonl", "results.json", ".lock"
PLUGINS = "plugins"  # copies of the run's plugin files and their manifest (t2.rundir.plugins)
# the test split's translations by the best checkpoint, a line each: what a paired
# significance test between two runs compares (t2.experiments.statistics.significance);
# their references are named in meta.json by SHA-256 (`references`, t2.data.references) and
# read from data.test. TEST_REFS: the copy of them that older runs kept, still read.
TEST_HYPS, TEST_REFS = "test.hyps.txt", "test.refs.txt"
SWEEP_LOG = "sweep.log"  # the output of a sweep's `t2 train` process(es) for this run
# a run's records: all that comparisons and reports read (t2.experiments.sweeps.runs) and how it
# went, without the weights, training state or tokenizer: small enough to commit
RECORDS = (CONFIG, META, METRICS, RESULTS, TEST_HYPS, SWEEP_LOG)


@dataclass(frozen=True)
class RunDir:
    """A run directory; every path inside one is built here."""

    path: Path

    def __init__(self, path: str | Path) -> None:
        object.__setattr__(self, "path", Path(path))

    @classmethod
    def of(cls, ckpt: Path) -> RunDir:
        """The run directory that holds a checkpoint folder."""
        return cls(Path(ckpt).parent.parent)

    config = property(lambda self: self.path / CONFIG)
    meta = property(lambda self: self.path / META)
    tokenizer = property(lambda self: self.path / TOKENIZER)
    metrics = property(lambda self: self.path / METRICS)
    results = property(lambda self: self.path / RESULTS)
    test_hyps = property(lambda self: self.path / TEST_HYPS)
    test_refs = property(lambda self: self.path / TEST_REFS)
    checkpoint_dir = property(lambda self: self.path / CHECKPOINTS)
    plugins = property(lambda self: self.path / PLUGINS)

    def file(self, name: str) -> Path:
        """Another file at the top of the run (lr_find.png, W&B's folder, ...)."""
        return self.path / name

    def checkpoint(self, step: int) -> Path:
        return self.checkpoint_dir / f"step-{step:07d}"

    def lock(self) -> TextIO:
        """Hold the run for this process (RUN/.lock, an exclusive POSIX lock, which the
        kernel releases when the process ends, killed or not, and which the loader's forked
        workers do not inherit): a second training in the same folder is refused in one
        line. Keep the returned file open while training."""
        import fcntl

        self.path.mkdir(parents=True, exist_ok=True)
        handle = open(self.path / LOCK, "a+", encoding="utf-8")  # noqa: SIM115
        try:
            fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise ConfigError(
                f"{self.path} is in use by a training run ({holder}); wait for "
                f"it to end or pass another --out"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        handle.flush()
        return handle

    def has_checkpoints(self) -> bool:
        return self.checkpoint_dir.is_dir()

    def checkpoints(self) -> list[Path]:
        """Complete training checkpoints, oldest first."""
        found = self.checkpoint_dir.glob("step-*")
        return sorted(p for p in found if p.is_dir() and is_complete(p))

    def latest(self) -> Path | None:
        found = self.checkpoints()
        return found[-1] if found else None

    def best(self) -> Path | None:
        """The checkpoint marked best, if it is still there and complete."""
        marker = self.checkpoint_dir / BEST
        if marker.is_file():
            candidate = self.checkpoint_dir / marker.read_text().strip()
            if is_complete(candidate):
                return candidate
        return None

    def mark_best(self, ckpt: Path) -> None:
        with atomic_text(self.checkpoint_dir / BEST) as f:
            f.write(ckpt.name + "\n")

    def last(self, n: int, until: Path | None = None) -> list[Path]:
        """The last `n` complete checkpoints, ending at `until` if given."""
        found = [p for p in self.checkpoints() if until is None or p.name <= until.name]
        if len(found) < n:
            raise CheckpointError(
                f"averaging the last {n} checkpoints needs {n} complete checkpoints but "
                f"{self.path} has {len(found)}; pass a smaller N"
            )
        return found[-n:]


def step_of(ckpt: str | Path) -> int | None:
    """The training step a checkpoint folder was saved at (None for an average or another name)."""
    name = Path(ckpt).name
    return int(name[5:]) if name.startswith("step-") and name[5:].isdigit() else None


def is_complete(ckpt: Path) -> bool:
    return (ckpt / COMPLETE).is_file() and (ckpt / WEIGHTS).is_file()


def is_run_or_checkpoint(path: str | Path) -> bool:
    """Whether `path` is a run directory or a checkpoint folder (each holds config.yaml;
    a checkpoint COMPLETE too, a run checkpoints/), complete or not."""
    path = Path(path)
    return (path / CONFIG).is_file() or (path / CHECKPOINTS).is_dir() or is_complete(path)


def resolve(path: str | Path) -> Path:
    """A checkpoint folder from a run directory (its best, else latest) or a checkpoint path.
    A best marker that names a checkpoint no longer there is an error, not the latest."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"checkpoint {path} not found; pass a run directory or checkpoint")
    if (path / WEIGHTS).is_file():
        if not is_complete(path):
            raise CheckpointError(f"checkpoint {path} is incomplete (no {COMPLETE} marker)")
        return path
    run = RunDir(path)
    marker = run.checkpoint_dir / BEST
    if marker.is_file() and run.best() is None:  # never fall back quietly to another one
        name = marker.read_text().strip()
        latest = run.latest()
        fix = f"pass a checkpoint folder, e.g. {latest}" if latest else "train it again"
        raise CheckpointError(
            f"{path} marks {name} as its best checkpoint, but {name} is missing or "
            f"incomplete; {fix}"
        )
    found = run.best() or run.latest()
    if found is None:
        raise CheckpointError(f"no complete checkpoint under {path}; train first or pass one")
    return found


def eval_folder(ckpt: Path, tag: str) -> Path:
    """Where an evaluation of a checkpoint on a test set writes hyps.txt and scores.json."""
    return Path(ckpt) / f"eval-{tag}"


def evaluations(ckpt: Path) -> list[Path]:
    """The scores.json of each evaluation written beside a checkpoint (eval_folder)."""
    return sorted(Path(ckpt).glob("eval-*/scores.json"))


def new_meta(world_size: int, **extra: Any) -> dict[str, Any]:
    """What meta.json records: versions and the number of processes that wrote it."""
    return {
        "format": FORMAT,
        "t2": __version__,
        "torch": torch.__version__,
        "world_size": world_size,
        **extra,
    }


def scored_references(folder: Path) -> dict[str, str]:
    """What a run's meta.json names of the test set its translations (test.hyps.txt) were
    scored on (`references`: test and test_source, t2.data.references): a restart carries
    them, since they belong to the translations on disk, until the run is scored again."""
    if not (Path(folder) / META).is_file():
        return {}
    named = read_meta(Path(folder)).get("references") or {}
    return {key: named[key] for key in ("test", "test_source") if key in named}


def read_meta(folder: Path) -> dict[str, Any]:
    """A run's or checkpoint's meta.json, its format checked; format 1 had none."""
    path = Path(folder) / META
    if not path.is_file():
        _missing_in_a_current_run(Path(folder))
        return {"format": 1, "t2": "0.1"}
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise CheckpointError(
            f"{path} is not valid JSON; {folder} is damaged: use another"
        ) from None
    fmt = meta.get("format") if isinstance(meta, dict) else None
    if not isinstance(fmt, int):
        raise CheckpointError(f"{path} names no format version; {folder} is damaged: use another")
    if fmt > FORMAT:
        raise CheckpointError(
            f"{folder} is run-directory format {fmt} (t2 {meta.get('t2', '?')}); this t2 "
            f"{__version__} reads formats {FIRST_READABLE} to {FORMAT}: upgrade t2"
        )
    if fmt < FIRST_READABLE:
        raise CheckpointError(
            f"{folder} is run-directory format {fmt}; this t2 {__version__} reads formats "
            f"{FIRST_READABLE} to {FORMAT}: load it with the t2 {meta.get('t2', '?')} that wrote it"
        )
    return meta


def _missing_in_a_current_run(folder: Path) -> None:
    """A checkpoint without meta.json in a run that has one was damaged, not written by
    format 1 (which had none anywhere): say so, and name a checkpoint to resume from."""
    if folder.parent.name != CHECKPOINTS or not (folder.parent.parent / META).is_file():
        return
    others = [c for c in RunDir.of(folder).checkpoints() if c != folder]
    instead = f"--resume {step_of(others[-1])}" if others else "a new run (no other checkpoint)"
    raise CheckpointError(
        f"{folder} has no {META}: it was damaged after it was written; continue with {instead}"
    )


def write_lines(path: Path, lines: list[str]) -> None:
    """Text a line each (UTF-8), written atomically; a line's own breaks become spaces, so
    line i is always sentence i."""
    with atomic_text(path) as f:
        f.writelines(one_line(line) + "\n" for line in lines)


def read_written_lines(path: Path) -> list[str]:
    """The lines write_lines wrote."""
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def write_json(path: Path, record: dict[str, Any]) -> None:
    """Write a small JSON file atomically (a reader never sees half of it)."""
    with atomic_text(path) as f:
        f.write(json.dumps(record, indent=2) + "\n")
