"""Cleaning rules of report 000: normalise, drop empty and duplicate pairs, then by token length.

Each rule reports exactly how many pairs it dropped; `Report` prints them in one line.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


@dataclass
class Report:
    """How many pairs a split started with and how many each rule dropped, in order."""

    split: str
    read: int
    dropped: dict[str, int] = field(default_factory=dict)

    @property
    def kept(self) -> int:
        return self.read - sum(self.dropped.values())

    def line(self) -> str:
        rules = ", ".join(f"{n} {rule}" for rule, n in self.dropped.items()) or "nothing"
        return f"data {self.split}: {self.read} pairs read; dropped {rules}; kept {self.kept}"


def normalise(text: str) -> str:
    """NFC and single spaces: runs of any Unicode whitespace become one space, ends trimmed."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def _normalise_batch(batch: dict[str, list[str]]) -> dict[str, list[str]]:
    return {
        "src": [normalise(s or "") for s in batch["src"]],
        "tgt": [normalise(t or "") for t in batch["tgt"]],
    }


def clean_pairs(
    ds: datasets.Dataset, report: Report, dedup: bool, num_proc: int
) -> datasets.Dataset:
    """Normalised pairs without empty sides (and without repeats if dedup); counts in report."""
    ds = ds.map(_normalise_batch, batched=True, num_proc=map_procs(ds, num_proc), desc="normalise")
    table = ds.with_format("arrow")[:]
    empty = np.asarray(pc.or_(_is_empty(table["src"]), _is_empty(table["tgt"])))
    keep = ~empty
    report.dropped["empty"] = int(empty.sum())
    if dedup:
        frame = ds.select_columns(["src", "tgt"]).to_pandas()
        repeat = frame.duplicated().to_numpy() & keep
        keep &= ~repeat
        report.dropped["duplicate"] = int(repeat.sum())
    return ds if keep.all() else ds.select(np.flatnonzero(keep))


def length_mask(
    src_len: np.ndarray, tgt_len: np.ndarray, max_tokens: int, max_ratio: float, report: Report
) -> np.ndarray:
    """Which pairs to keep: at most max_tokens tokens a side, side lengths within max_ratio."""
    too_long = (src_len > max_tokens) | (tgt_len > max_tokens)
    ratio = np.maximum(src_len, tgt_len) / np.maximum(np.minimum(src_len, tgt_len), 1)
    off_ratio = ~too_long & (ratio > max_ratio) if max_ratio > 0 else np.zeros_like(too_long)
    report.dropped[f"longer than {max_tokens} tokens"] = int(too_long.sum())
    report.dropped[f"length ratio above {max_ratio:g}"] = int(off_ratio.sum())
    return ~(too_long | off_ratio)


def _is_empty(column: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.equal(pc.utf8_length(column), 0)


def map_procs(ds: datasets.Dataset, num_proc: int) -> int | None:
    """datasets.map's num_proc: None for one process or data too small to split."""
    return num_proc if num_proc > 1 and len(ds) >= 10 * num_proc else None
