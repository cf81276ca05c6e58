"""Batches as tensors: the collate function (padding to a batch's planned shape), the
resumable DataLoader over t2.data.batching's sampler, and Batches, what training reads."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from itertools import chain
from typing import Any

import datasets
import numpy as np
import torch
from torch.utils.data import DataLoader

from t2.data.batching import BatchSampler


def collate(
    examples: list[dict],
    pad_id: int,
    lengths: tuple[int, int] | None = None,
    seed: int | None = None,
) -> dict[str, torch.Tensor]:
    """Right-padded int64 tensors: src (B, S), tgt_in = tgt[:-1] and tgt_out = tgt[1:] (B, T);
    S and T + 1 are `lengths` (a bucket's) when given, else the longest row's."""
    src_len, tgt_len = lengths or (0, 0)
    src, _ = _pad([e["src_ids"] for e in examples], pad_id, src_len)
    tgt, mask = _pad([e["tgt_ids"] for e in examples], pad_id, tgt_len)  # (B, T + 1)
    tgt_in = np.where(mask[:, 1:], tgt[:, :-1], pad_id)  # each row's EOS is not an input
    out = {
        "src": torch.from_numpy(src),
        "tgt_in": torch.from_numpy(tgt_in),
        "tgt_out": torch.from_numpy(np.ascontiguousarray(tgt[:, 1:])),
    }
    if seed is not None:  # the batch's random seed (ShapedBatch.seed), read by train_step
        out["seed"] = torch.tensor(seed, dtype=torch.int64)
    return out


def _pad(rows: list[list[int]], pad_id: int, width: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Rows in one (B, max(width, longest)) int64 array, filled in one vectorised step; and
    the mask."""
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    mask = np.arange(max(width, lengths.max())) < lengths[:, None]
    out = np.full(mask.shape, pad_id, dtype=np.int64)
    out[mask] = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=int(lengths.sum()))
    return out, mask


class _Collate:
    """A picklable collate_fn for worker processes."""

    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id

    def __call__(self, fetched: tuple[Any, Any, list[dict]]) -> dict[str, Any]:
        lengths, seed, examples = fetched
        return collate(examples, self.pad_id, lengths, seed)


class _Pairs(torch.utils.data.Dataset):
    """The encoded pairs, fetched a batch at a time together with the lengths the sampler
    pads that batch to (ShapedBatch.lengths)."""

    def __init__(self, ds: datasets.Dataset) -> None:
        self.ds = ds

    def __len__(self) -> int:
        return len(self.ds)

    def __getitem__(self, i: int) -> dict:
        return self.ds[i]

    def __getitems__(self, batch: list[int]) -> tuple[Any, Any, list[dict]]:
        lengths, seed = getattr(batch, "lengths", None), getattr(batch, "seed", None)
        return lengths, seed, self.ds.__getitems__(list(batch))


class ResumableLoader(DataLoader):
    """A DataLoader that moves its sampler's position by the batches handed out, not those
    prefetched: each one handed out means one consumed by every process."""

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        sampler: BatchSampler = self.batch_sampler  # type: ignore[assignment]
        epoch, start = sampler.epoch, sampler.position
        for k, batch in enumerate(super().__iter__(), 1):
            sampler.epoch, sampler.position = epoch, start + k * sampler.world_size
            yield batch
        sampler.epoch, sampler.position = epoch + 1, 0  # the next pass reshuffles


class Batches:
    """Micro-batches without end, epoch after epoch; the sampler holds the position. A
    context manager: on leaving, the loader's workers are shut down (Lightning does the
    same, by the same private call), not left to the interpreter's exit."""

    def __init__(self, loader: ResumableLoader) -> None:
        self.loader, self.it = loader, iter(loader)

    def __iter__(self) -> Batches:
        return self

    def __enter__(self) -> Batches:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the loader's workers (each reads its end from its queue); the next iteration
        starts new ones."""
        workers = getattr(self.loader, "_iterator", None)  # the persistent workers' iterator
        if workers is not None and hasattr(workers, "_shutdown_workers"):
            workers._shutdown_workers()
        self.loader._iterator = None

    def __next__(self) -> dict[str, torch.Tensor]:
        try:
            return next(self.it)
        except StopIteration:  # the loader moved its sampler to the next epoch
            self.it = iter(self.loader)
            return next(self.it)


def make_loader(
    ds: datasets.Dataset, sampler: BatchSampler, pad_id: int, num_workers: int = 0
) -> DataLoader:
    """Batches of padded tensors; background workers stay alive between epochs.

    The loader draws its workers' base seed from a generator of its own: from the global
    RNG, that draw happens when iteration starts (lazily, at the first batch), which on
    resume is after the RNG was restored, and would shift every later dropout mask."""
    return ResumableLoader(
        _Pairs(ds.select_columns(["src_ids", "tgt_ids"])),
        batch_sampler=sampler,
        collate_fn=_Collate(pad_id),
        num_workers=num_workers,
        persistent_workers=num_workers > 0,
        pin_memory=torch.cuda.is_available(),
        generator=torch.Generator().manual_seed(sampler.seed),
        worker_init_fn=leave_signals_to_trainer if num_workers > 0 else None,
    )


def leave_signals_to_trainer(worker_id: int) -> None:
    """In each loader worker: the stop signals are the trainer's (t2.train.preempt). A
    signal goes to a group: torchrun forwards with killpg, SLURM signals every process of
    a step, a terminal's Ctrl-C reaches its foreground group. A worker that died of it
    would end the trainer (`DataLoader worker ... is killed by signal`) before it saved,
    so workers ignore SIGUSR1 and SIGINT, and SIGTERM unless their trainer sent it: that
    is the loader's own shutdown (multiprocessing's terminate()), as torch's worker handler
    has it: SIGTERM is blocked, and a thread reads who sent it (sigwaitinfo)."""
    for sig in (signal.SIGUSR1, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # threads made later inherit it
    trainer = os.getppid()
    threading.Thread(target=_ended_by, args=(trainer,), daemon=True).start()


def _ended_by(trainer: int) -> None:
    """Exit at a SIGTERM from `trainer`; one from anyone else is the trainer's to act on."""
    while True:
        if signal.sigwaitinfo({signal.SIGTERM}).si_pid == trainer:
            os._exit(0)
