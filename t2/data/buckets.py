"""Length buckets with few distinct batch shapes (Sockeye's buckets, Marian's and fairseq's
multiples of 8), their boundaries chosen from the data to pad as little as possible.

A pair falls in the cell (S, T) of the smallest source and target boundaries at or above
its lengths, and is padded to them; a cell is cut into batches of `rows` pairs, the most
that fit the token budget at its longer side, rounded down to `rows_multiple` (so every
matrix product's token dimension, rows x length, is a multiple of it). A cell's last pairs
that do not fill a batch move on to the next larger cell that covers them, so that each
cell yields one shape; only the pairs left over at the end form a batch of their own.

Every GPU-side cost that is paid once per shape (cuDNN's attention plans, torch.compile,
CUDA graphs) is then paid a bounded number of times. Boundaries are the optimal 1-D
quantisation of each side's lengths (dynamic programming over the length histogram), with
as many boundaries as keep the epoch's shapes within `max_shapes`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Cell:
    src_len: int
    tgt_len: int
    rows: int
    members: np.ndarray  # pair indices, in the order they are cut into batches


def padding_optimal_cuts(lengths: np.ndarray, most: int, multiple: int = 1) -> list[np.ndarray]:
    """For k = 1..most, the k boundaries (ascending, the last the longest length) that
    minimise the total padding of `lengths` padded up to the next boundary; boundaries are
    multiples of `multiple` (but the last, which may be rounded up to one)."""
    top = int(lengths.max())
    last = -(-top // multiple) * multiple
    counts = np.bincount(lengths, minlength=last + 1).astype(np.float64)
    n, total = np.cumsum(counts), np.cumsum(counts * np.arange(last + 1))
    ends = [b for b in range(1, last + 1) if b % multiple == 0 or b == last]
    ends = [b for b in ends if counts[: b + 1].sum() > 0] or [last]
    starts = np.array([0, *ends[:-1]])  # a bucket (a, b] after boundary a (0: none)
    most = max(1, min(most, len(ends)))
    best = np.full((most + 1, len(ends) + 1), np.inf)
    back = np.zeros((most + 1, len(ends) + 1), dtype=np.int64)
    best[0, 0] = 0.0  # column j + 1: the first j + 1 candidate ends covered
    for k in range(1, most + 1):
        for j, b in enumerate(ends):
            prev = np.arange(j + 1)  # the bucket starts after candidate prev - 1 (0: start)
            a = starts[prev]
            cost = (n[b] - n[a]) * b - (total[b] - total[a])
            value = best[k - 1, prev] + cost
            i = int(np.argmin(value))
            best[k, j + 1], back[k, j + 1] = value[i], i
    cuts = []
    for k in range(1, most + 1):
        picked, j = [], len(ends)
        for level in range(k, 0, -1):
            if not np.isfinite(best[level, j]):
                break
            picked.append(ends[j - 1])
            j = int(back[level, j])
            if j == 0:
                break
        cuts.append(np.array(sorted(set(picked)), dtype=np.int64))
    return cuts


@dataclass(frozen=True)
class _Step:
    """A cell's part of the layout: its lengths and rows, how many pairs it holds by then
    (its own and those moved on to it), how many of them it batches, and where the rest go."""

    cell: tuple[int, int]
    src_len: int
    tgt_len: int
    rows: int
    whole: int
    then: tuple[int, int] | None


def _walk(
    counts: dict[tuple[int, int], int],
    src_cuts: np.ndarray,
    tgt_cuts: np.ndarray,
    max_tokens: int,
    rows_multiple: int,
) -> list[_Step]:
    """The layout of cells holding `counts` pairs, smallest first: what cells() does to the
    pairs themselves, on their counts."""
    counts = dict(counts)
    keys = sorted(counts, key=lambda c: (max(src_cuts[c[0]], tgt_cuts[c[1]]), c))
    steps = []
    for n, (i, j) in enumerate(keys):
        s, t = int(src_cuts[i]), int(tgt_cuts[j])
        fit = max(1, max_tokens // max(s, t))
        rows = fit // rows_multiple * rows_multiple or fit
        covering = next((c for c in keys[n + 1 :] if c[0] >= i and c[1] >= j), None)
        size = counts[(i, j)]
        whole = size // rows * rows if covering else size
        if covering:  # the leftover pairs are padded to the next cell that covers them
            counts[covering] += size - whole
        steps.append(_Step((i, j), s, t, rows, whole, covering))
    return steps


def _cell_keys(
    src: np.ndarray, tgt: np.ndarray, src_cuts: np.ndarray, tgt_cuts: np.ndarray
) -> np.ndarray:
    """Each pair's cell as one number, source bucket x target buckets + target bucket: 16
    bits (a stable sort of them is a radix sort), buckets found by table lookup."""
    small = len(src_cuts) * len(tgt_cuts) <= np.iinfo(np.uint16).max
    kind = np.uint16 if small else np.int64  # computed in it: no corpus-long int64 array
    si = np.searchsorted(src_cuts, np.arange(int(src.max()) + 1)).astype(kind)
    ti = np.searchsorted(tgt_cuts, np.arange(int(tgt.max()) + 1)).astype(kind)
    key = si[src]
    key *= kind(len(tgt_cuts))
    key += ti[tgt]
    return key


def _index_type(n: int) -> type:
    """Pair indices in 32 bits while they fit: half the memory of an epoch's batches."""
    return np.int32 if n < 2**31 else np.int64


def cells(
    src: np.ndarray,
    tgt: np.ndarray,
    src_cuts: np.ndarray,
    tgt_cuts: np.ndarray,
    max_tokens: int,
    rows_multiple: int,
    rng: np.random.Generator | None,
) -> list[Cell]:
    """The batches' cells, smallest first; each member list shuffled by `rng` (None: in
    index order) before the cell's leftover pairs move on."""
    key = _cell_keys(src, tgt, src_cuts, tgt_cuts)
    order = np.argsort(key, kind="stable").astype(_index_type(len(key)))
    ranked = key[order]
    starts = np.flatnonzero(ranked[1:] != ranked[:-1]) + 1  # where each cell's pairs begin
    found = ranked[np.concatenate([[0], starts])] if len(ranked) else ranked
    groups = np.split(order, starts)
    members = {divmod(int(k), len(tgt_cuts)): g for k, g in zip(found, groups, strict=True)}
    out = []
    counts = {c: len(g) for c, g in members.items()}
    for step in _walk(counts, src_cuts, tgt_cuts, max_tokens, rows_multiple):
        pool = members[step.cell]
        if rng is not None:
            pool = pool[rng.permutation(len(pool))]
        out.append(Cell(step.src_len, step.tgt_len, step.rows, pool[: step.whole]))
        if step.then is not None:
            members[step.then] = np.concatenate([pool[step.whole :], members[step.then]])
    return [c for c in out if len(c.members)]


def layout_shapes(
    src: np.ndarray,
    tgt: np.ndarray,
    src_cuts: np.ndarray,
    tgt_cuts: np.ndarray,
    max_tokens: int,
    rows_multiple: int,
) -> set[tuple[int, int, int]]:
    """shapes(cells(...)) from the cells' counts alone: no pair is sorted or moved."""
    counts = np.bincount(_cell_keys(src, tgt, src_cuts, tgt_cuts))
    found = {divmod(int(k), len(tgt_cuts)): int(counts[k]) for k in np.flatnonzero(counts)}
    steps = _walk(found, src_cuts, tgt_cuts, max_tokens, rows_multiple)
    return _shapes((s.whole, s.rows, s.src_len, s.tgt_len) for s in steps)


def shapes(cell_list: list[Cell]) -> set[tuple[int, int, int]]:
    """The distinct (rows, source length, target length) of the batches the cells make."""
    return _shapes((len(c.members), c.rows, c.src_len, c.tgt_len) for c in cell_list)


def _shapes(cells: Iterable[tuple[int, int, int, int]]) -> set[tuple[int, int, int]]:
    """The batch shapes of cells of (pairs, rows, source length, target length): full
    batches of `rows`, and one of what is left over."""
    out = set()
    for pairs, rows, src_len, tgt_len in cells:
        if pairs // rows:
            out.add((rows, src_len, tgt_len))
        if pairs % rows:
            out.add((pairs % rows, src_len, tgt_len))
    return out
