"""Cleaning rules of report 000: normalise, drop empty and duplicate pairs, then by token length.

Each rule reports exactly how many pairs it dropped; `Report` prints them in one line. The
rules work on Arrow arrays a chunk at a time: only the strings that normalising may change
(non-ASCII, or with whitespace other than single spaces between words) go through Python.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# bytes that make a string worth normalising in Python: every non-ASCII byte (NFC, Unicode
# spaces) and the ASCII whitespace that str.split() splits on, but the space
SUSPECT = np.zeros(256, dtype=bool)
SUSPECT[128:] = True
SUSPECT[[9, 10, 11, 12, 13, 28, 29, 30, 31]] = True
SPACE = 32


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

    def drop(self, rule: str, count: int) -> None:
        self.dropped[rule] = self.dropped.get(rule, 0) + count


def normalise(text: str) -> str:
    """NFC and single spaces: runs of any Unicode whitespace become one space, ends trimmed."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def _suspects(strings: pa.StringArray) -> np.ndarray:
    """Indices of the strings that normalise() may change: those with a SUSPECT byte, two
    spaces in a row, or a space at either end."""
    offsets = np.frombuffer(strings.buffers()[1], np.int32, len(strings) + 1, 4 * strings.offset)
    data = np.frombuffer(strings.buffers()[2], np.uint8)[offsets[0] : offsets[-1]]
    starts, ends = offsets[:-1] - offsets[0], offsets[1:] - offsets[0]
    space = data == SPACE
    marks = SUSPECT[data]
    marks[:-1] |= space[:-1] & space[1:]
    at = np.flatnonzero(marks)
    rows = np.searchsorted(ends, at, side="right")  # the string each mark falls in
    nonempty = ends > starts
    edges = nonempty & (space[np.minimum(starts, len(data) - 1)] | space[np.maximum(ends - 1, 0)])
    return np.union1d(np.unique(rows), np.flatnonzero(edges)) if len(data) else at


def normalise_array(strings: pa.Array) -> pa.Array:
    """normalise() of every string (a null becomes ""), the same strings as str's."""
    strings = pc.fill_null(strings.cast(pa.string()), "")
    if isinstance(strings, pa.ChunkedArray):
        strings = strings.combine_chunks()
    suspects = _suspects(strings)
    if len(suspects) == 0:
        return strings
    mask = np.zeros(len(strings), dtype=bool)
    mask[suspects] = True
    fixed = [normalise(s) for s in strings.take(suspects).to_pylist()]
    return pc.replace_with_mask(strings, pa.array(mask), pa.array(fixed, pa.string()))


def is_empty(strings: pa.Array) -> np.ndarray:
    return np.asarray(pc.equal(pc.utf8_length(strings), 0))


class Repeats:
    """Which pairs of a split repeat an earlier one, from keys gathered a chunk at a time. A
    pair is known by two 64-bit hashes of different tuples of its sides (Python's hash, fixed
    within a process): a pair taken for a repeat needs both to collide at once, odds of about
    1e-25 at 40M pairs."""

    def __init__(self) -> None:
        self.keys: list[np.ndarray] = []

    def add(self, src: list[str], tgt: list[str]) -> None:
        keys = np.empty((len(src), 2), dtype=np.int64)
        keys[:, 0] = [hash((s, t)) for s, t in zip(src, tgt, strict=True)]
        keys[:, 1] = [hash((t, 1, s)) for s, t in zip(src, tgt, strict=True)]
        self.keys.append(keys)

    def repeats(self) -> np.ndarray:
        """True for each pair added that equals one added before it."""
        keys = np.concatenate(self.keys) if self.keys else np.empty((0, 2), np.int64)
        self.keys = []
        order = np.lexsort((keys[:, 1], keys[:, 0]))  # stable: the first of equal keys first
        ranked = keys[order]
        same = np.zeros(len(keys), dtype=bool)
        same[1:] = (ranked[1:] == ranked[:-1]).all(axis=1)
        repeat = np.zeros(len(keys), dtype=bool)
        repeat[order] = same
        return repeat


def length_mask(
    src_len: np.ndarray, tgt_len: np.ndarray, max_tokens: int, max_ratio: float, report: Report
) -> np.ndarray:
    """Which pairs to keep: at most max_tokens tokens a side, side lengths within max_ratio.
    Worked out a million pairs at a time: its float ratios never span a corpus."""
    keep = np.ones(len(src_len), dtype=bool)
    counts = [0, 0]
    for start in range(0, len(src_len), 1 << 20):
        src, tgt = src_len[start : start + (1 << 20)], tgt_len[start : start + (1 << 20)]
        too_long = (src > max_tokens) | (tgt > max_tokens)
        ratio = np.maximum(src, tgt) / np.maximum(np.minimum(src, tgt), 1)
        off_ratio = ~too_long & (ratio > max_ratio) if max_ratio > 0 else np.zeros_like(too_long)
        keep[start : start + len(src)] = ~(too_long | off_ratio)
        counts[0], counts[1] = counts[0] + int(too_long.sum()), counts[1] + int(off_ratio.sum())
    report.dropped[f"longer than {max_tokens} tokens"] = counts[0]
    report.dropped[f"length ratio above {max_ratio:g}"] = counts[1]
    return keep
