"""benchmarks/host_sync.py: the host syncs of a timed training step, found on a CPU by
following which tensors would live on the device. Neither loop's timed step syncs (but
transformers' own padding check in the peer), an injected read is caught at its line, and
each kind of sync is caught while its sync-free look-alike is not."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from test_benchmarks import load
from test_benchmarks_train import tiny_loop_inputs


def test_neither_timed_step_syncs_with_the_device(single_thread):
    """benchmarks.host_sync follows which tensors would live on the GPU (parameters, their
    gradients, the step's copies of the batch, and what is computed from them) and records
    each read of one on the host. t2's step on CUDA's code path makes none; the peer's
    makes none of its own: the syncs left are transformers' padding check in
    MarianMTModel (`padding_mask.all()` in masking_utils), which every user of that model
    who passes an attention_mask pays, on every step (step 2 included: the optimizer's
    state, the buffers and the engine's tensors are device tensors from the start)."""
    from benchmarks.host_sync import syncs_in_step
    from t2.model.codepath import simulated

    loops = load("train_loops")
    cfg, served = tiny_loop_inputs(4)
    for engine in (loops.T2Engine, loops.MarianEngine):
        e = engine(cfg, None, None, "fp32", iter(served))
        for _ in range(2):  # the first step makes the optimizer's state, too
            with simulated("cuda"):
                seen = syncs_in_step(e)
            if engine is loops.T2Engine:
                assert seen == [], seen
            else:  # transformers' padding checks, given an attention_mask: 2-3 a step
                assert [c for c in seen if "/transformers/masking_utils.py:" not in c] == []
                assert 2 <= len(seen) <= 3, seen


def test_the_sync_detector_catches_a_value_read_in_a_timed_step(single_thread):
    """Copies of both loops, each with one host read injected in its timed step, are caught
    at the injected line: the peer counting its device batch (`.tolist()`, the bug that
    issue 54 found) and t2 reading its running loss (`.item()`)."""
    import inspect

    from benchmarks.host_sync import syncs_in_step
    from t2.model.codepath import simulated

    loops = load("train_loops")
    cfg, served = tiny_loop_inputs(4)

    class CountsOnDevice(loops.MarianEngine):
        def step(self) -> dict:
            served = super().step()
            on_device = {k: v.to(loops.device()) for k, v in served.items()}
            self.counted = on_device["src"].ne(0).sum(1).tolist()
            return served

    class ReadsItsLoss(loops.T2Engine):
        def step(self) -> dict:
            served = super().step()
            self.loss = self.stats.loss.item()
            return served

    for engine, read, op in (
        (CountsOnDevice, "tolist", "TensorBase.tolist"),
        (ReadsItsLoss, "item", "aten._local_scalar_dense.default"),
    ):
        e = engine(cfg, None, None, "fp32", iter(served))
        line = next(
            i for i, s in enumerate(inspect.getsource(engine).splitlines()) if f".{read}()" in s
        )
        where = f"{__file__}:{inspect.getsourcelines(engine)[1] + line}"
        with simulated("cuda"):
            seen = syncs_in_step(e)
        assert f"{op} at {where}" in seen, seen


SYNC_KINDS = {  # each makes the host wait for the device when `t` lives there
    "item": lambda t, h: t.sum().item(),
    "bool": lambda t, h: bool(t.sum() > 0),
    "print": lambda t, h: print(t, file=io.StringIO()),
    "repr": lambda t, h: repr(t),
    "f-string": lambda t, h: f"{t.sum():.3f}",
    "bool mask": lambda t, h: t[t > 0],
    "masked_select": lambda t, h: torch.masked_select(t, t > 0),
    "repeat_interleave": lambda t, h: torch.repeat_interleave(t.abs().long().flatten()),
    "one-argument where": lambda t, h: torch.where(t > 0),
    "argwhere": lambda t, h: torch.argwhere(t),
    "unique": lambda t, h: torch.unique(t),
    "bincount": lambda t, h: torch.bincount(t.abs().long().flatten()),
    "histc": lambda t, h: torch.histc(t),
    "index_put with a mask": lambda t, h: t.__setitem__(t > 0, 0.0),
    "equal": lambda t, h: torch.equal(t, t),
    "allclose": lambda t, h: torch.allclose(t, t),
    "is_nonzero": lambda t, h: t.sum().is_nonzero(),
    "np.asarray": lambda t, h: np.asarray(t),
    "tolist": lambda t, h: t.tolist(),
    "copy_ into the host": lambda t, h: h.copy_(t),
    "tensor of a list": lambda t, h: torch.tensor([t.sum()]),
    ".cpu()": lambda t, h: t.cpu(),
    '.to("cpu")': lambda t, h: t.to("cpu"),
    ".to(host tensor)": lambda t, h: t.to(h),
    ".to(torch.device('cpu'))": lambda t, h: t.to(torch.device("cpu")),
    "f-string of several values": lambda t, h: f"{t}",
    "a new_tensor read": lambda t, h: t.new_tensor([1.0, 2.0]).sum().item(),
    "as_tensor to the host": lambda t, h: torch.as_tensor(t, device="cpu"),
    "asarray to the host": lambda t, h: torch.asarray(t, device="cpu"),
    ".type() to a host type": lambda t, h: t.type(torch.FloatTensor),
    "masked_fill with a device value": lambda t, h: t.masked_fill(t > 0, t.sum()),
}
NO_SYNCS = {  # the same operators where the sizes are known, or on the host
    "three-argument where": lambda t, h: torch.where(t > 0, t, 0.0),
    "repeat_interleave with output_size": lambda t, h: torch.repeat_interleave(
        t, torch.ones(4, dtype=torch.long, device=t.device), dim=0, output_size=4
    ),
    "masked_fill": lambda t, h: t.masked_fill(t > 0, 0.0),
    "index with integers": lambda t, h: t[torch.tensor([0, 1])],
    "a host read": lambda t, h: h.sum().item(),
    "copy_ to the device": lambda t, h: t.copy_(h),
    ".to(the device)": lambda t, h: t.to(torch.device("cpu")),
    ".type() read": lambda t, h: t.type(),
}


@pytest.mark.parametrize("kind", SYNC_KINDS)
def test_every_kind_of_host_sync_is_caught_at_its_line(kind):
    """Reads, printing, outputs sized by values, Python answers and copies to the host: each
    is recorded once at the line that made it. torch.device("cpu") names the host on a GPU
    machine (stand_in=False); where a CPU stands in for the device it names the device."""
    import inspect

    from benchmarks.host_sync import HostSyncs

    t, h = torch.randn(4, 2), torch.zeros(4, 2)
    with HostSyncs([t], stand_in="torch.device" not in kind) as seen:
        SYNC_KINDS[kind](t, h)
    where = f"{__file__}:{inspect.getsourcelines(SYNC_KINDS[kind])[1]}"
    assert [s.where for s in seen.syncs] == [where], seen.calls
    assert seen.syncs[0].stack[0] == where


@pytest.mark.parametrize("kind", NO_SYNCS)
def test_the_same_operators_without_a_sync_are_not_flagged(kind):
    from benchmarks.host_sync import HostSyncs

    t, h = torch.randn(4, 2), torch.zeros(4, 2)
    with HostSyncs([t]) as seen:
        NO_SYNCS[kind](t, h)
    assert seen.calls == []


def test_a_sync_on_state_made_before_the_step_is_seen_on_the_second_step(single_thread):
    """The device tensors are everything the engine holds, not only its parameters: a read
    of the optimizer's steady state, of a model buffer or of the engine's running stats
    is caught on step 2 too (they were made before that step, so no operator in it
    made them)."""
    from benchmarks.host_sync import syncs_in_step
    from t2.model.codepath import simulated

    loops = load("train_loops")
    cfg, served = tiny_loop_inputs(4)
    reads = {
        "optimizer state": lambda e: next(iter(e.optimizer.state.values()))["exp_avg"],
        "buffer": lambda e: next(e.model.buffers()),
        "stats": lambda e: e.stats.loss,
    }
    for what, read in reads.items():

        class ReadsBeforeItsStep(loops.T2Engine):
            def step(self, read=read) -> dict:
                if self.optimizer.state:
                    self.seen_value = read(self).sum().item()
                return super().step()

        e = ReadsBeforeItsStep(cfg, None, None, "fp32", iter(served))
        with simulated("cuda"):
            assert syncs_in_step(e) == []  # no state yet: no read
            second = syncs_in_step(e)
        assert [c.partition(" at ")[0] for c in second] == ["aten._local_scalar_dense.default"]
        assert __file__ in second[0], (what, second)
