"""Batches: the token budget holds, shards are disjoint, order is seeded, state resumes."""

from __future__ import annotations

import datasets
import numpy as np
import pytest
import torch

from t2.data.batching import BatchSampler
from t2.data.loader import collate, make_loader
from t2.errors import DataError

RNG = np.random.default_rng(0)
SRC = RNG.integers(2, 60, size=3000).tolist()
TGT = np.clip(np.array(SRC) + RNG.integers(-8, 9, size=3000), 2, 70).tolist()


def sampler(**kw) -> BatchSampler:
    args = {"max_tokens": 1024, "batch_size": 0, "seed": 1, "shuffle": True, **kw}
    return BatchSampler(SRC, TGT, **args)


def padded(batch: list[int]) -> int:
    return len(batch) * max(max(SRC[i], TGT[i]) for i in batch)


def test_token_budget_is_never_exceeded_and_every_pair_appears_once() -> None:
    s = sampler()
    batches = list(s)
    assert len(batches) == len(s) and all(padded(b) <= 1024 for b in batches)
    assert sorted(i for b in batches for i in b) == list(range(len(SRC)))
    filled = np.mean([padded(b) for b in batches]) / 1024
    assert filled > 0.9  # buckets of similar length fill the budget


def test_fixed_batch_size_when_no_token_budget() -> None:
    batches = list(sampler(max_tokens=0, batch_size=64))
    assert [len(b) for b in batches[:-1]] == [64] * (len(batches) - 1)
    assert sorted(i for b in batches for i in b) == list(range(len(SRC)))


def test_order_is_deterministic_and_changes_with_seed_and_epoch() -> None:
    a, b = list(sampler()), list(sampler())
    assert a == b and a != list(sampler(seed=2))
    s = sampler()
    first, second = list(s), list(s)  # a finished pass moves to the next epoch
    assert first == a and second != first and s.epoch == 2
    assert len(first) == len(second)  # the same number of batches in every epoch


def test_without_shuffle_batches_are_sorted_and_stable() -> None:
    batches = list(sampler(shuffle=False))
    assert batches == list(sampler(shuffle=False, seed=9))
    sizes = [max(max(SRC[i], TGT[i]) for i in b) for b in batches]
    assert sizes == sorted(sizes)


@pytest.mark.parametrize("world_size", [2, 3])
def test_shards_are_disjoint_equal_and_cover_the_cut_epoch(world_size: int) -> None:
    full = list(sampler())
    shards = [list(sampler(rank=r, world_size=world_size)) for r in range(world_size)]
    assert len({len(s) for s in shards}) == 1  # DDP needs the same number of steps per rank
    seen = [i for s in shards for b in s for i in b]
    assert len(seen) == len(set(seen))
    usable = len(full) // world_size * world_size
    assert sorted(seen) == sorted(i for b in full[:usable] for i in b)


def test_state_dict_resumes_after_the_last_yielded_batch() -> None:
    s = sampler()
    s.set_epoch(3)
    expected = list(sampler_at_epoch(3))
    it = iter(s)
    taken = [next(it) for _ in range(5)]
    state = s.state_dict()
    assert state["epoch"] == 3 and state["position"] == 5
    restored = sampler()
    restored.load_state_dict(state)
    restored.set_epoch(3)  # the training loop may call this again on resume: position is kept
    assert taken + list(restored) == expected
    restored.set_epoch(4)
    assert next(iter(restored)) == list(sampler_at_epoch(4))[0]


def sampler_at_epoch(epoch: int) -> BatchSampler:
    s = sampler()
    s.set_epoch(epoch)
    return s


def test_state_from_another_setup_is_refused_naming_the_key() -> None:
    state = sampler().state_dict()
    with pytest.raises(DataError, match="saved with data.max_tokens=1024, now 512"):
        sampler(max_tokens=512).load_state_dict(state)
    with pytest.raises(DataError, match="saved with train.seed=1, now 2"):
        sampler(seed=2).load_state_dict(state)
    with pytest.raises(DataError, match="training data differ"):
        BatchSampler(SRC[:-1], TGT[:-1], 1024, 0, 1, True).load_state_dict(state)


@pytest.mark.parametrize(("saved", "resumed"), [(2, 1), (1, 2), (2, 3), (3, 2)])
def test_a_position_saved_with_w_processes_resumes_with_another_number(saved, resumed) -> None:
    """The global position: what W processes had not consumed yet, W' processes consume,
    each batch exactly once (the cut is for 6 batches a step: 2 x 3 and 3 x 2 alike)."""
    full = list(sampler(step_batches=6))
    before = [sampler(rank=r, world_size=saved, step_batches=6) for r in range(saved)]
    its = [iter(s) for s in before]
    steps = 5
    consumed = [next(it) for _ in range(steps * 6 // saved) for it in its]
    state = before[0].state_dict()
    assert state["position"] == steps * 6
    after = [sampler(rank=r, world_size=resumed, step_batches=6) for r in range(resumed)]
    for s in after:
        s.load_state_dict(state)
    rest = [list(s) for s in after]
    assert sorted(consumed + [b for r in rest for b in r]) == sorted(full)
    for r, batches in enumerate(rest):  # rank r takes global batches 30 + r, 30 + r + W', ...
        assert batches == full[steps * 6 + r :: resumed]


def test_bad_settings_fail_with_the_fix() -> None:
    longest = max(max(a, b) for a, b in zip(SRC, TGT, strict=True))
    with pytest.raises(DataError, match=rf"has {longest} tokens, more than data.max_tokens=64"):
        sampler(max_tokens=64)
    with pytest.raises(DataError, match="set data.max_tokens .* or data.batch_size"):
        sampler(max_tokens=0, batch_size=0)
    with pytest.raises(DataError, match="cannot feed 4 per step"):
        BatchSampler([3, 3], [3, 3], 100, 0, 1, True, rank=0, world_size=4)


def test_collate_pads_and_shifts_the_target() -> None:
    batch = collate(
        [
            {"src_ids": [5, 6, 2], "tgt_ids": [1, 7, 2]},
            {"src_ids": [5, 2], "tgt_ids": [1, 7, 8, 9, 2]},
        ],
        0,
    )
    assert batch["src"].tolist() == [[5, 6, 2], [5, 2, 0]]
    assert batch["tgt_in"].tolist() == [[1, 7, 0, 0], [1, 7, 8, 9]]
    assert batch["tgt_out"].tolist() == [[7, 2, 0, 0], [7, 8, 9, 2]]
    assert all(t.dtype == torch.int64 for t in batch.values())


def tiny_dataset() -> datasets.Dataset:
    ids = [[5] * (n % 9 + 1) + [2] for n in range(200)]
    return datasets.Dataset.from_dict({"src_ids": ids, "tgt_ids": [[1, *x] for x in ids]})


@pytest.mark.parametrize("num_workers", [0, 2])
def test_loader_resumes_where_it_stopped_despite_prefetching(num_workers: int) -> None:
    ds = tiny_dataset()
    lengths = [len(x) for x in ds["tgt_ids"]]

    def loader() -> torch.utils.data.DataLoader:
        return make_loader(ds, BatchSampler(lengths, lengths, 40, 0, 7, True), 0, num_workers)

    reference = [b["src"].tolist() for b in loader()]
    first = loader()
    taken = []
    for batch in first:  # workers prefetch batches beyond the ones handed out
        taken.append(batch["src"].tolist())
        if len(taken) == 4:
            break
    state = first.batch_sampler.state_dict()
    assert state["position"] == 4
    second = loader()
    second.batch_sampler.load_state_dict(state)
    assert taken + [b["src"].tolist() for b in second] == reference
    assert all(max(len(r) for r in b) * len(b) <= 40 for b in reference)
