"""The data cache's format: folders written whole with a SHA-256 of each file
(sha256.json), holding Arrow IPC streams that `datasets` memory-maps (cleaned pairs, token
ids) or a tokenizer. Streams are written and read a record batch at a time, so no stage
holds a whole corpus in memory. A folder that fails its checksum or fails to load is set
aside (renamed `.damaged-*`, never deleted) and rebuilt from the source, in one line."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

import datasets
import pyarrow as pa

from t2.atomic import sha256, writing
from t2.data.stages import Heartbeat
from t2.errors import T2Error

SUMS = "sha256.json"
T = TypeVar("T")


def save_folder(folder: Path, fill: Callable[[Path], None]) -> None:
    """A cache folder, filled by `fill` in a temporary folder beside it, with the checksum
    of each file, then renamed into place (unless another process saved it first)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        with writing(f"the data cache {folder}", folder.parent):
            fill(tmp)
            files = [p for p in sorted(tmp.rglob("*")) if p.is_file()]
            sums = {str(p.relative_to(tmp)): sha256(p) for p in files}
            (tmp / SUMS).write_text(json.dumps(sums, indent=1), encoding="utf-8")
        with contextlib.suppress(OSError):  # another process saved the same folder first
            tmp.rename(folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def folder_damage(folder: Path) -> str | None:
    """Why a cache folder cannot be trusted (a file missing or changed), or None."""
    try:
        sums = json.loads((folder / SUMS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"no readable {SUMS}"
    for name, expected in sums.items():
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        if sha256(path) != expected:
            return f"{name} does not match its checksum"
    return None


def load_folder(folder: Path, load: Callable[[Path], T], stage: str) -> T | None:
    """What `load` reads from a cache folder; None when there is none, or when it is damaged
    (then it is set aside, with one line, for the caller to rebuild). Checking it is timed
    as `stage` (its checksums read every byte)."""
    if not folder.is_dir():
        return None
    with Heartbeat(stage):
        problem = folder_damage(folder)
    if problem is None:
        try:
            return load(folder)
        except T2Error:
            raise
        except Exception as err:  # e.g. pyarrow.lib.ArrowInvalid from a truncated file
            problem = f"it does not load: {_first_line(err)}"
    set_aside([folder], problem)
    return None


def set_aside(paths: list[Path], problem: str) -> None:
    """Rename damaged cache files or folders to `.damaged-NAME-TIME` beside them, saying so."""
    stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    for path in paths:
        aside = path.with_name(f".damaged-{path.name}-{stamp}")
        path.rename(aside)
        print(
            f"data cache: {path} is damaged ({problem}); set aside as {aside.name}, "
            f"rebuilding it from the source",
            flush=True,
        )


def write_stream(path: Path, batches: Iterable[pa.RecordBatch]) -> int:
    """An Arrow IPC stream of `batches` (the schema of the first; at least one); its rows."""
    rows, writer = 0, None
    try:
        for batch in batches:
            if writer is None:
                writer = pa.ipc.new_stream(os.fspath(path), batch.schema)
            writer.write_batch(batch)
            rows += batch.num_rows
    finally:
        if writer is not None:
            writer.close()
    return rows


def read_stream(path: Path) -> Iterator[pa.RecordBatch]:
    """The record batches of an Arrow IPC stream, each read into memory and let go (a memory
    map would keep every page read so far in the process's resident memory)."""
    with pa.OSFile(os.fspath(path)) as f:
        yield from pa.ipc.open_stream(f)


def open_stream(path: Path) -> datasets.Dataset:
    """An Arrow IPC stream as a dataset, memory-mapped: pages are read when used."""
    return datasets.Dataset.from_file(os.fspath(path))


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
