"""From a recipe's data section to cleaned pairs and token ids, cached between runs.

Cleaned pairs are saved under the cache folder, keyed by the source's content (a file's
xxh3, a task's name, seed, size and code, a dataset's fingerprint), the languages and the
cleaning options; token ids beside them, keyed by the pairs, the
tokenizer and data.src_bos (t2.data.encode). Both are Arrow streams written a chunk at a
time and memory-mapped when read, so memory follows the chunk, not the corpus; both carry
checksums, and a damaged cache is set aside and rebuilt (t2.data.cache).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import pyarrow as pa
from datasets.table import InMemoryTable

from t2.data.cache import load_folder, open_stream, read_stream, save_folder, write_stream
from t2.data.clean import Repeats, Report, is_empty, normalise_array
from t2.data.config import DataConfig
from t2.data.sources import SPLITS, Source, open_source
from t2.data.stages import stage
from t2.errors import ConfigError, DataError

CACHE_VERSION = 3  # bump when cleaning or encoding changes, to invalidate old caches
CHUNK = 1 << 16  # pairs cleaned and encoded at a time
PAIRS, REPORT = "pairs.arrow", "report.json"


def cache_root(cfg: DataConfig) -> Path:
    """data.cache_dir, else the datasets cache (HF_DATASETS_CACHE) / t2."""
    return Path(cfg.cache_dir or Path(datasets.config.HF_DATASETS_CACHE) / "t2")


def digest(*parts: Any) -> str:
    """A short key of JSON-able parts, for a cache folder's name."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]


def pairs_key(cfg: DataConfig, split: str, source: Source) -> str:
    """What the cleaned pairs depend on: the source and the cleaning options."""
    limit = cfg.max_train_pairs if split == "train" else 0
    langs = cfg.src_lang, cfg.tgt_lang
    return digest(CACHE_VERSION, source.identity, split, *langs, cfg.dedup, limit)


def load_pairs(cfg: DataConfig, split: str, seed: int) -> datasets.Dataset:
    """Cleaned pairs of a split (columns src, tgt), memory-mapped; prints what each rule
    dropped."""
    if split not in SPLITS:
        raise ConfigError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")
    source = open_source(cfg, split, seed)
    key = pairs_key(cfg, split, source)
    folder = cache_root(cfg) / "pairs" / key
    cached = load_folder(folder, _read_cached, f"data {split}: check the cache")
    if cached is not None:
        report, ds = cached
        print(f"{report.line()} (cached in {folder})", flush=True)
    else:
        report = Report(split, 0)
        save_folder(folder, lambda tmp: _clean_into(tmp, source, cfg, split, seed, report))
        print(report.line(), flush=True)
        ds = open_stream(folder / PAIRS)
    # the pairs' content key, not their file's path (what `datasets` would fingerprint), so
    # the tokenizer's and the ids' keys that read it are the same in any data.cache_dir
    ds._fingerprint = f"pairs-{key}"
    return ds


def _read_cached(folder: Path) -> tuple[Report, datasets.Dataset]:
    report = Report(**json.loads((folder / REPORT).read_text()))
    return report, open_stream(folder / PAIRS)


def _clean_into(
    tmp: Path, source: Source, cfg: DataConfig, split: str, seed: int, report: Report
) -> None:
    """Read, normalise and filter the pairs into tmp/PAIRS, counting each rule in report;
    a source whose content changed while it was read (its key taken again) is refused."""
    limit = cfg.max_train_pairs if split == "train" else 0
    report.read = source.count()
    report.dropped["empty"] = 0
    repeats = Repeats() if cfg.dedup else None
    first = tmp / ("all.arrow" if cfg.dedup else PAIRS)
    with stage(f"data {split}: read and clean", report.read) as progress:
        kept = write_stream(first, _cleaned(source, report, repeats, limit, progress))
    if repeats is not None:
        repeat = repeats.repeats()
        report.dropped["duplicate"] = int(repeat.sum())
        kept = write_stream(tmp / PAIRS, _without(read_stream(first), ~repeat, limit))
        first.unlink()
    if limit and report.read - sum(report.dropped.values()) > limit:
        report.dropped[f"beyond max_train_pairs={limit}"] = report.kept - kept
    if open_source(cfg, split, seed).identity != source.identity:
        raise DataError(
            f"data.{split}={getattr(cfg, split)} changed while it was read; nothing was "
            f"cached: run again once it is complete"
        )
    if kept == 0:
        print(report.line(), flush=True)
        raise DataError(
            f"data.{split}={getattr(cfg, split)} has no pairs left after cleaning; check the source"
        )
    (tmp / REPORT).write_text(json.dumps(report.__dict__))


def _cleaned(
    source: Source, report: Report, repeats: Repeats | None, limit: int, progress: Any
) -> Iterator[pa.RecordBatch]:
    """Normalised pairs without an empty side, chunk by chunk (the first `limit` when no
    repeats are to go first: the rest are counted, not kept); at least one batch."""
    written = 0
    schema = pa.schema([("src", pa.string()), ("tgt", pa.string())])
    yield pa.RecordBatch.from_arrays([pa.array([], pa.string())] * 2, schema=schema)
    for src, tgt in source.read(CHUNK):
        progress.update(len(src))
        src, tgt = normalise_array(src), normalise_array(tgt)
        keep = ~(is_empty(src) | is_empty(tgt))
        report.dropped["empty"] += int(len(keep) - keep.sum())
        batch = pa.RecordBatch.from_arrays([src, tgt], schema=schema).filter(pa.array(keep))
        if repeats is not None:
            repeats.add(batch["src"].to_pylist(), batch["tgt"].to_pylist())
        elif limit:
            batch = batch.slice(0, max(limit - written, 0))
        written += batch.num_rows
        yield batch


def _without(
    batches: Iterator[pa.RecordBatch], keep: np.ndarray, limit: int
) -> Iterator[pa.RecordBatch]:
    """The rows of `batches` where `keep` holds, the first `limit` of them (0: all)."""
    start = written = 0
    for batch in batches:
        mask = keep[start : start + batch.num_rows]
        start += batch.num_rows
        kept = batch.filter(pa.array(mask))
        if limit:
            kept = kept.slice(0, max(limit - written, 0))
        written += kept.num_rows
        yield kept


def take_rows(ds: datasets.Dataset, rows: np.ndarray) -> datasets.Dataset:
    """ds.select(rows), built from the array at once: select() makes a Python list of every
    index first, seconds and hundreds of MB at WMT's size. The mapping is 32 bits while
    the table's rows fit."""
    if ds._indices is not None:  # a selection of a selection: rows of the table beneath
        rows = ds._indices.column(0).to_numpy()[rows]
    kind = pa.uint32() if len(ds.data) < 2**32 else pa.uint64()
    indices = InMemoryTable(pa.table({"indices": pa.array(rows, kind)}))
    fingerprint = digest(ds._fingerprint, hashlib.sha256(rows.tobytes()).hexdigest())
    return datasets.Dataset(ds.data, ds.info, ds.split, indices, fingerprint)


def column(ds: datasets.Dataset, name: str) -> np.ndarray:
    """A column as one NumPy array, through the dataset's indices mapping (a select), read
    from Arrow at once: indexing a `datasets` column walks its rows one by one in Python."""
    values = ds.data.column(name).to_numpy()
    indices = ds._indices  # the mapping that select() and filters leave; None without one
    return values if indices is None else values[indices.column(0).to_numpy()]


def pair_batches(ds: datasets.Dataset) -> Iterator[pa.RecordBatch]:
    """The pairs' src and tgt a chunk at a time: read from their cache file when they have
    one (memory-mapping it would keep every page read in this process's resident memory)."""
    files = ds.cache_files
    if len(files) == 1 and ds._indices is None and set(ds.column_names) == {"src", "tgt"}:
        return read_stream(Path(files[0]["filename"]))
    tables = ds.select_columns(["src", "tgt"]).with_format("arrow").iter(CHUNK)
    return (batch for table in tables for batch in table.to_batches())
