"""Token-budget batches from length-sorted buckets (fairseq's --max-tokens), resumable.

Sentences are sorted by length with random tie-breaking, cut greedily into batches whose
padded size (longest side x sentences) stays within the budget, and the batches shuffled.
Every rank builds the same list from the seed and takes every world_size-th batch.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import chain

import datasets
import numpy as np
import torch
from torch.utils.data import DataLoader

from t2.errors import DataError


class BatchSampler:
    """Lists of dataset indices per batch, deterministic given seed and epoch, resumable."""

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
    ) -> None:
        self.sizes = np.maximum(np.asarray(src_lengths), np.asarray(tgt_lengths)).astype(np.int64)
        self.min_sizes = np.minimum(np.asarray(src_lengths), np.asarray(tgt_lengths))
        self.max_tokens, self.batch_size = max_tokens, batch_size
        self.seed, self.shuffle = seed, shuffle
        self.rank, self.world_size = rank, world_size
        self.epoch, self.position = 0, 0
        self._cache: tuple[int, list[list[int]]] | None = None
        if not 0 <= rank < world_size:
            raise DataError(f"rank {rank} is outside world size {world_size}")
        if len(self.sizes) == 0:
            raise DataError("no pairs to batch; check the data source and filters")
        if max_tokens <= 0 and batch_size <= 0:
            raise DataError("set data.max_tokens (tokens per batch) or data.batch_size (sentences)")
        if max_tokens > 0 and self.sizes.max() > max_tokens:
            i = int(self.sizes.argmax())
            raise DataError(
                f"pair {i} has {self.sizes[i]} tokens, more than data.max_tokens={max_tokens}; "
                f"raise data.max_tokens or lower data.max_tokens_per_sentence"
            )
        if len(self._epoch_batches(0)) < world_size:
            raise DataError(
                f"{len(self._epoch_batches(0))} batches cannot feed {world_size} processes; "
                f"lower data.max_tokens or data.batch_size"
            )

    def _all_batches(self, epoch: int) -> list[np.ndarray]:
        """Every batch of an epoch, before sharding."""
        rng = np.random.default_rng([self.seed, epoch])
        n = len(self.sizes)
        if self.max_tokens <= 0:
            order = rng.permutation(n) if self.shuffle else np.arange(n)
            return [order[i : i + self.batch_size] for i in range(0, n, self.batch_size)]
        tie = rng.permutation(n) if self.shuffle else np.arange(n)
        order = np.lexsort((tie, self.min_sizes, self.sizes))  # by longest side, then shorter
        bounds = _greedy_bounds(self.sizes[order].tolist(), self.max_tokens)
        batches = [order[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        if self.shuffle:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        return batches

    def _epoch_batches(self, epoch: int) -> list[list[int]]:
        """This rank's batches: the list cut to a multiple of world_size, every W-th from rank."""
        if self._cache is None or self._cache[0] != epoch:
            batches = self._all_batches(epoch)
            usable = len(batches) // self.world_size * self.world_size
            mine = [b.tolist() for b in batches[self.rank : usable : self.world_size]]
            self._cache = (epoch, mine)
        return self._cache[1]

    def set_epoch(self, epoch: int) -> None:
        """Start `epoch`; a restored position within the same epoch is kept."""
        if epoch != self.epoch:
            self.epoch, self.position = epoch, 0

    def __len__(self) -> int:
        return len(self._epoch_batches(self.epoch))

    def __iter__(self) -> Iterator[list[int]]:
        epoch = self.epoch
        batches = self._epoch_batches(epoch)
        for i in range(self.position, len(batches)):
            self.epoch, self.position = epoch, i + 1
            yield batches[i]
        self.epoch, self.position = epoch + 1, 0  # the next pass reshuffles

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "position": self.position, "batches": len(self)}

    def load_state_dict(self, state: dict) -> None:
        """Continue after the last batch yielded when `state` was taken."""
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
        if "batches" in state and state["batches"] != len(self):
            raise DataError(
                f"the loader state is for {state['batches']} batches per epoch, this loader has "
                f"{len(self)}; resume with the same data, batch settings and number of processes"
            )


def _greedy_bounds(sizes: list[int], max_tokens: int) -> list[int]:
    """Cut points for sizes sorted ascending: a batch grows while count x last size fits."""
    bounds, start = [0], 0
    for i, size in enumerate(sizes):
        if (i + 1 - start) * size > max_tokens:
            bounds.append(i)
            start = i
    bounds.append(len(sizes))
    return bounds


def collate(examples: list[dict], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded int64 tensors: src (B, S), tgt_in = tgt[:-1] and tgt_out = tgt[1:] (B, T)."""
    src, _ = _pad([e["src_ids"] for e in examples], pad_id)
    tgt, mask = _pad([e["tgt_ids"] for e in examples], pad_id)  # (B, T + 1)
    tgt_in = np.where(mask[:, 1:], tgt[:, :-1], pad_id)  # each row's EOS is not an input
    return {
        "src": torch.from_numpy(src),
        "tgt_in": torch.from_numpy(tgt_in),
        "tgt_out": torch.from_numpy(np.ascontiguousarray(tgt[:, 1:])),
    }


def _pad(rows: list[list[int]], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows in one (B, longest) int64 array, filled in one vectorised step; and the mask."""
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    mask = np.arange(lengths.max()) < lengths[:, None]
    out = np.full(mask.shape, pad_id, dtype=np.int64)
    out[mask] = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=int(lengths.sum()))
    return out, mask


class _Collate:
    """A picklable collate_fn for worker processes."""

    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id

    def __call__(self, examples: list[dict]) -> dict[str, torch.Tensor]:
        return collate(examples, self.pad_id)


class ResumableLoader(DataLoader):
    """A DataLoader whose sampler position counts the batches handed out, not prefetched."""

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        sampler: BatchSampler = self.batch_sampler  # type: ignore[assignment]
        epoch, start = sampler.epoch, sampler.position
        for k, batch in enumerate(super().__iter__(), start + 1):
            sampler.epoch, sampler.position = epoch, k
            yield batch
        sampler.epoch, sampler.position = epoch + 1, 0


def make_loader(
    ds: datasets.Dataset, sampler: BatchSampler, pad_id: int, num_workers: int = 0
) -> DataLoader:
    """Batches of padded tensors; background workers stay alive between epochs."""
    return ResumableLoader(
        ds.select_columns(["src_ids", "tgt_ids"]),
        batch_sampler=sampler,
        collate_fn=_Collate(pad_id),
        num_workers=num_workers,
        persistent_workers=num_workers > 0,
        pin_memory=torch.cuda.is_available(),
    )
