"""Length buckets: boundaries that pad least, every pair once in a cell that covers it,
rows a multiple of 8 within the budget, few shapes an epoch, the costliest batch first."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from t2.data.batching import BatchSampler
from t2.data.buckets import cells, layout_shapes, padding_optimal_cuts, shapes
from t2.data.loader import collate
from t2.errors import DataError

RNG = np.random.default_rng(0)
# a corpus like the shared mixed one: mostly short pairs, a long tail, targets near sources
SRC = np.clip(RNG.lognormal(2.6, 0.5, size=6000).astype(np.int64), 2, 120)
TGT = np.clip(SRC + RNG.integers(-4, 5, size=6000), 3, 122)


def padding(lengths: np.ndarray, cuts: np.ndarray) -> int:
    return int((cuts[np.searchsorted(cuts, lengths)] - lengths).sum())


def test_boundaries_pad_least_among_all_choices() -> None:
    """Against every choice of k boundaries among the lengths that occur (brute force)."""
    lengths = RNG.integers(1, 14, size=300)
    cuts = padding_optimal_cuts(lengths, 4)
    candidates = sorted(set(lengths.tolist()) - {int(lengths.max())})
    for k in range(1, 5):
        assert len(cuts[k - 1]) <= k and cuts[k - 1][-1] == lengths.max()
        best = min(
            padding(lengths, np.array(sorted([*c, int(lengths.max())])))
            for c in itertools.combinations(candidates, k - 1)
        )
        assert padding(lengths, cuts[k - 1]) == best


def test_boundaries_keep_to_a_length_multiple() -> None:
    cuts = padding_optimal_cuts(SRC, 6, multiple=8)
    assert all((c % 8 == 0).all() for c in cuts)
    assert cuts[-1][-1] >= SRC.max()


def test_every_pair_once_in_a_cell_that_covers_it_with_rows_a_multiple_within_budget() -> None:
    src_cuts, tgt_cuts = padding_optimal_cuts(SRC, 8)[-1], padding_optimal_cuts(TGT, 8)[-1]
    layout = cells(SRC, TGT, src_cuts, tgt_cuts, 1024, 8, np.random.default_rng(1))
    seen = np.concatenate([c.members for c in layout])
    assert sorted(seen.tolist()) == list(range(len(SRC)))
    for c in layout:
        assert (SRC[c.members] <= c.src_len).all() and (TGT[c.members] <= c.tgt_len).all()
        assert c.rows % 8 == 0 and c.rows * max(c.src_len, c.tgt_len) <= 1024
    partial = [c for c in layout if len(c.members) % c.rows]
    assert len(partial) <= 2  # leftovers move on; only those of cells none covers remain


@pytest.mark.parametrize("max_tokens", [1024, 8192])
def test_an_epoch_has_at_most_max_shapes_and_little_padding(max_tokens: int) -> None:
    s = BatchSampler(SRC, TGT, max_tokens, 0, 1, True, max_shapes=32, rows_multiple=8)
    batches = list(s)
    assert len(s.shapes()) <= 32
    assert sorted(i for b in batches for i in b) == list(range(len(SRC)))
    padded = sum(len(b) * sum(b.lengths) for b in batches)
    greedy = BatchSampler(SRC, TGT, max_tokens, 0, 1, True)  # each batch padded to its longest
    greedy_padded = sum(len(b) * (SRC[b].max() + TGT[b].max()) for b in greedy)
    if max_tokens == 1024:
        assert len(greedy.shapes()) > 32  # what the buckets are for
    real = SRC.sum() + TGT.sum()
    assert 1 - real / padded < 1 - real / greedy_padded + 0.05


def test_batches_are_padded_to_their_bucket_and_shapes_hold_across_epochs() -> None:
    s = BatchSampler(SRC, TGT, 2048, 0, 1, True, max_shapes=16, rows_multiple=8)
    first, second = list(s), list(s)
    assert first != second  # reshuffled
    assert {(len(b), *b.lengths) for b in first} == {(len(b), *b.lengths) for b in second}
    b = first[3]
    examples = [{"src_ids": [5] * SRC[i], "tgt_ids": [5] * TGT[i]} for i in b]
    out = collate(examples, 0, b.lengths)
    assert out["src"].shape == (len(b), b.lengths[0])
    assert out["tgt_in"].shape == (len(b), b.lengths[1] - 1)


def test_the_costliest_batch_of_every_epoch_runs_first_whatever_the_processes() -> None:
    cost = lambda rows, s, t: rows * max(s, t) ** 2  # noqa: E731  (attention-like growth)
    order = None
    for world in (1, 2, 3):
        s = BatchSampler(
            SRC, TGT, 2048, 0, 1, True, 0, world, max_shapes=16, rows_multiple=8, cost=cost
        )
        for epoch in range(2):
            batches, lengths = s._epoch(epoch)
            costs = [cost(len(b), *ls) for b, ls in zip(batches, lengths, strict=True)]
            assert costs[0] == max(costs)
        first = next(iter(s))  # rank 0's first batch
        assert cost(len(first), *first.lengths) == costs[0]
        # the global list does not depend on the number of processes (resume on another)
        listed = [b.tolist() for b in s._epoch(0)[0]]
        order = order or listed[: len(listed) // 6 * 6]
        assert listed[: len(order)] == order


def test_a_run_saved_before_buckets_resumes_only_with_its_batching() -> None:
    old = BatchSampler(SRC, TGT, 2048, 0, 1, True)
    state = old.state_dict()
    for key in ("data.max_shapes", "data.pad_multiple", "data.length_multiple"):
        del state["plan"][key]  # as a run saved before they existed
    new = BatchSampler(SRC, TGT, 2048, 0, 1, True, max_shapes=64, rows_multiple=8)
    with pytest.raises(DataError, match=r"data.max_shapes=0, now 64.*--set data.max_shapes=0"):
        new.load_state_dict(state)
    BatchSampler(SRC, TGT, 2048, 0, 1, True).load_state_dict(state)  # the same batching


def test_shards_of_a_bucketed_epoch_are_disjoint_and_equal() -> None:
    shards = [
        list(BatchSampler(SRC, TGT, 2048, 0, 1, True, r, 3, max_shapes=16, rows_multiple=8))
        for r in range(3)
    ]
    assert len({len(s) for s in shards}) == 1
    seen = [i for s in shards for b in s for i in b]
    assert len(seen) == len(set(seen))


def test_shapes_from_counts_are_the_shapes_of_the_cells() -> None:
    """The shape limit is checked on the cells' counts (no pair sorted): the same shapes."""
    rng = np.random.default_rng(3)
    for _ in range(20):
        src_cuts = np.unique(rng.integers(2, 60, rng.integers(1, 6)))
        tgt_cuts = np.unique(rng.integers(2, 60, rng.integers(1, 6)))
        src_cuts[-1], tgt_cuts[-1] = SRC.max(), TGT.max()
        budget = int(rng.integers(64, 2048))
        layout = cells(SRC, TGT, np.sort(src_cuts), np.sort(tgt_cuts), budget, 8, rng)
        counted = layout_shapes(SRC, TGT, np.sort(src_cuts), np.sort(tgt_cuts), budget, 8)
        assert counted == shapes(layout)
