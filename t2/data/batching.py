"""Token-budget batches from length buckets (fairseq's --max-tokens), resumable.

With `max_shapes` (data.max_shapes), pairs fall in length buckets chosen from the data
(t2.data.buckets) and every batch of a bucket has one shape: an epoch has at most that many
distinct shapes, and the batch that needs the most memory runs first. Without, sentences
are sorted by length with random tie-breaking and cut greedily into batches whose padded
size (longest side x sentences) stays within the budget, each padded to its own longest.
The batches are shuffled. Every rank builds the same global list from the seed and takes
every world_size-th batch; the position in it counts the batches of all processes, so
resume works on any number.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from t2.data.buckets import cells, layout_shapes, padding_optimal_cuts
from t2.data.config import BEFORE_BUCKETS
from t2.errors import DataError

MOST_BOUNDARIES = 32  # per side; the shape limit usually binds well before


class ShapedBatch(list):
    """A batch's pair indices, the (source, target) lengths it is padded to (None: its
    longest) and its random seed, which follows the batch's place in the epoch's global
    list, not the process that trains it; picklable for worker processes."""

    lengths: tuple[int, int] | None = None
    seed: int | None = None


def batch_seed(seed: int, epoch: int, index: int) -> int:
    """The seed of global batch `index` of `epoch`: dropout's draws for it are the same on
    any number of processes and accumulation steps (train_step seeds from it)."""
    return int(np.random.SeedSequence([seed, epoch, index]).generate_state(1, np.uint64)[0] >> 1)


class BatchSampler:
    """This process's batches (lists of dataset indices), deterministic given seed and epoch.

    Every process builds the same global list of an epoch's batches, cut to a multiple of
    `step_batches` (processes x accumulate: the batches of one optimizer step), and takes
    every `world_size`-th from its rank. `position` counts the batches consumed by all
    processes in the epoch, so a run saved with W processes resumes with W' and continues
    with exactly the batches not consumed yet. The loader advances it (see ResumableLoader).
    """

    def __init__(
        self,
        src_lengths: Sequence[int],
        tgt_lengths: Sequence[int],
        max_tokens: int,
        batch_size: int,
        seed: int,
        shuffle: bool,
        rank: int = 0,
        world_size: int = 1,
        step_batches: int = 0,
        *,
        max_shapes: int = 0,
        rows_multiple: int = 1,
        length_multiple: int = 1,
        cost: Callable[[int, int, int], float] | None = None,
    ) -> None:
        """max_shapes (0: off), rows_multiple and length_multiple: the bucketed layout;
        cost(rows, src_len, tgt_len): a batch's memory, to run the largest first (default:
        padded tokens, then the longest side)."""
        # one NumPy array a side (a `datasets` column would be walked row by row), in the
        # smallest type that holds the lengths: a corpus's memory is its pairs' count
        self.src, self.tgt = _compact(src_lengths), _compact(tgt_lengths)
        self.max_shapes, self.rows_multiple = max_shapes, rows_multiple
        self.length_multiple = length_multiple
        self.cost = cost or (lambda rows, s, t: rows * (s + t) + max(s, t) / 1e6)
        self.max_tokens, self.batch_size = max_tokens, batch_size
        self.seed, self.shuffle = seed, shuffle
        self.rank, self.world_size = rank, world_size
        self.step_batches = step_batches or world_size
        self.epoch, self.position = 0, 0
        self._cache: tuple[int, list[np.ndarray]] | None = None
        if not 0 <= rank < world_size or self.step_batches % world_size:
            raise DataError(
                f"rank {rank}, world size {world_size} and {step_batches} batches "
                f"per step do not fit together"
            )
        if len(self.src) == 0:
            raise DataError("no pairs to batch; check the data source and filters")
        if max_tokens <= 0 and batch_size <= 0:
            raise DataError("set data.max_tokens (tokens per batch) or data.batch_size (sentences)")
        sizes = self.sizes
        if max_tokens > 0 and sizes.max() > max_tokens:
            i = int(sizes.argmax())
            raise DataError(
                f"pair {i} has {sizes[i]} tokens, more than data.max_tokens={max_tokens}; "
                f"raise data.max_tokens or lower data.max_tokens_per_sentence"
            )
        self.cuts = self._choose_cuts() if max_tokens > 0 and max_shapes > 0 else None
        if len(self._global(0)) == 0:
            raise DataError(
                f"{len(self._all_batches(0))} batches cannot feed {self.step_batches} per step "
                f"(processes x train.accumulate); lower data.max_tokens or data.batch_size"
            )

    @property
    def sizes(self) -> np.ndarray:
        """Each pair's longer side."""
        return np.maximum(self.src, self.tgt)

    @property
    def min_sizes(self) -> np.ndarray:
        """Each pair's shorter side."""
        return np.minimum(self.src, self.tgt)

    def _choose_cuts(self) -> tuple[np.ndarray, np.ndarray]:
        """Each side's boundaries: as many as keep the epoch within max_shapes (fewer
        boundaries pad more; the count of shapes does not depend on the shuffle)."""
        m = self.length_multiple
        src = padding_optimal_cuts(self.src, MOST_BOUNDARIES, m)
        tgt = padding_optimal_cuts(self.tgt, MOST_BOUNDARIES, m)
        for k in range(min(len(src), len(tgt)), 0, -1):
            found = layout_shapes(
                self.src, self.tgt, src[k - 1], tgt[k - 1], self.max_tokens, self.rows_multiple
            )
            if len(found) <= self.max_shapes or k == 1:
                return src[k - 1], tgt[k - 1]
        raise AssertionError("unreachable")

    def _bucketed(self, rng: np.random.Generator | None) -> tuple[list, list]:
        """The bucketed layout's batches and their (source, target) lengths, unshuffled."""
        assert self.cuts is not None
        layout = cells(self.src, self.tgt, *self.cuts, self.max_tokens, self.rows_multiple, rng)
        batches, lengths = [], []
        for c in layout:
            cut = np.split(c.members, range(c.rows, len(c.members), c.rows))
            batches += cut
            lengths += [(c.src_len, c.tgt_len)] * len(cut)
        return batches, lengths

    def _all_batches(self, epoch: int) -> tuple[list[np.ndarray], list]:
        """Every batch of an epoch and its padded lengths, before the cut and sharding."""
        rng = np.random.default_rng([self.seed, epoch])
        n = len(self.src)
        if self.max_tokens <= 0:
            order = rng.permutation(n) if self.shuffle else np.arange(n)
            cut = [order[i : i + self.batch_size] for i in range(0, n, self.batch_size)]
            return cut, [None] * len(cut)
        if self.cuts is not None:
            batches, lengths = self._bucketed(rng if self.shuffle else None)
            if self.shuffle:
                order = rng.permutation(len(batches))
                # the costliest first (on rank 0): a plan that does not fit fails at step 1;
                # one batch, whatever the processes, so that the list stays theirs to share
                costs = [self.cost(len(batches[i]), *lengths[i]) for i in order]
                first = int(np.argmax(costs))
                order = np.concatenate([order[first : first + 1], np.delete(order, first)])
                batches, lengths = [batches[i] for i in order], [lengths[i] for i in order]
            return batches, lengths
        tie = rng.permutation(n) if self.shuffle else np.arange(n)
        sizes = self.sizes
        order = np.lexsort((tie, self.min_sizes, sizes))  # by longest side, then shorter
        bounds = _greedy_bounds(sizes[order].tolist(), self.max_tokens)
        batches = [order[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        if self.shuffle:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        return batches, [None] * len(batches)

    def _global(self, epoch: int) -> list[np.ndarray]:
        """The epoch's batches of all processes, cut to whole optimizer steps."""
        return self._epoch(epoch)[0]

    def _epoch(self, epoch: int) -> tuple[list[np.ndarray], list]:
        if self._cache is None or self._cache[0] != epoch:
            batches, lengths = self._all_batches(epoch)
            keep = len(batches) // self.step_batches * self.step_batches
            self._cache = (epoch, batches[:keep], lengths[:keep])
        return self._cache[1], self._cache[2]

    def shapes(self, epoch: int = 0) -> set[tuple[int, int, int]]:
        """The distinct (rows, source length, target length) of the epoch's padded batches."""
        batches, lengths = self._epoch(epoch)
        return {
            (len(b), *(ls or (int(self.src[b].max()), int(self.tgt[b].max()))))
            for b, ls in zip(batches, lengths, strict=True)
        }

    def set_epoch(self, epoch: int) -> None:
        """Start `epoch`; a restored position within the same epoch is kept."""
        if epoch != self.epoch:
            self.epoch, self.position = epoch, 0

    def __len__(self) -> int:
        """This process's batches in the epoch."""
        return len(range(self.rank, len(self._global(self.epoch)), self.world_size))

    def __iter__(self) -> Iterator[list[int]]:
        """This process's rest of the epoch. Iterated directly, the position follows what is
        yielded; through a prefetching loader, ResumableLoader sets it to what was handed out."""
        epoch, (batches, lengths) = self.epoch, self._epoch(self.epoch)
        for i in range(self.position + self.rank, len(batches), self.world_size):
            self.epoch, self.position = epoch, i - self.rank + self.world_size
            batch = ShapedBatch(batches[i].tolist())
            batch.lengths, batch.seed = lengths[i], batch_seed(self.seed, epoch, i)
            yield batch
        self.epoch, self.position = epoch + 1, 0  # the next pass reshuffles

    def plan(self) -> dict[str, Any]:
        """What fixes the global list of batches; a resume must find the same."""
        sizes = self.sizes.astype(np.int64).tobytes() + self.min_sizes.astype(np.int64).tobytes()
        digest = hashlib.sha256(sizes)
        return {
            "train.seed": self.seed,
            "data.max_tokens": self.max_tokens,
            "data.batch_size": self.batch_size,
            "data.max_shapes": self.max_shapes,
            "data.pad_multiple": self.rows_multiple,
            "data.length_multiple": self.length_multiple,
            "pairs": len(self.src),
            "lengths": digest.hexdigest()[:16],
        }

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "position": self.position, "plan": self.plan()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue after the last batch consumed (by all processes) when `state` was taken."""
        saved = {**PLAN_BEFORE_BUCKETS, **state["plan"]}  # a run saved before they existed
        now = self.plan()
        for key in ("train.seed", "data.max_tokens", "data.batch_size", *PLAN_BEFORE_BUCKETS):
            if saved[key] != now[key]:
                raise DataError(
                    f"the run was saved with {key}={saved[key]}, now {now[key]}: the batches "
                    f"would differ; resume with --set {key}={saved[key]} or start a new run"
                )
        if (saved["pairs"], saved["lengths"]) != (now["pairs"], now["lengths"]):
            raise DataError(
                f"the training data differ from the saved run's ({saved['pairs']} pairs then, "
                f"{now['pairs']} now): resume with the same data.train and cleaning settings"
            )
        self.epoch, self.position = int(state["epoch"]), int(state["position"])


PLAN_BEFORE_BUCKETS = BEFORE_BUCKETS  # what a run saved before the buckets batched with


def _compact(lengths: Sequence[int]) -> np.ndarray:
    """Lengths as one array of the smallest unsigned type of 16 bits or more that holds them
    (16 for any sentence a model trains on)."""
    values = np.asarray(lengths)
    top = int(values.max()) if len(values) else 0
    return values.astype(np.min_scalar_type(max(top, 2**16 - 1)), copy=False)


def _greedy_bounds(sizes: list[int], max_tokens: int) -> list[int]:
    """Cut points for sizes sorted ascending: a batch grows while count x last size fits."""
    bounds, start = [0], 0
    for i, size in enumerate(sizes):
        if (i + 1 - start) * size > max_tokens:
            bounds.append(i)
            start = i
    bounds.append(len(sizes))
    return bounds
