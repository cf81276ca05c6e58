"""Smoke tests of the training benchmarks (bench_train, its scaling table and op counts, the
loop it shares with train.py): a tiny configuration runs end to end and prints consistent
figures (no timing is asserted; benchmarks measure, tests do not)."""

from __future__ import annotations

import io
import json
import statistics

import numpy as np
import pytest
import torch
from test_benchmarks import TINY, load, needs_data


def train_argv(*extra: str, pairs: int = 600) -> list[str]:
    """bench_train's arguments for a tiny run: one thread, `pairs` pairs, a 300-entry
    vocabulary, the TINY model; `extra` between them and the model."""
    return ["--threads", "1", "--pairs", str(pairs), "--vocab", "300", *extra, *TINY]


def test_bench_train_breakdown_needs_rounds_to_time(capsys):
    with pytest.raises(SystemExit):
        load("bench_train").parse_args(["--rounds", "0", "--breakdown"])
    assert "give --rounds 1 or more" in capsys.readouterr().err


@needs_data
def test_bench_train_interleaves_both_loops_and_writes_ratios(tmp_path, single_thread):
    out = tmp_path / "train.json"
    argv = train_argv(
        "--max-tokens",
        "200",
        "--rounds",
        "2",
        "--steps-per-round",
        "1",
        "--batches",
        "2",
        "--sightings",
        "1",
        "--precisions",
        "fp32,bf16",
        "--breakdown",
        "--json",
        str(out),
    )
    records = load("bench_train").main(argv)
    assert json.loads(out.read_text()) == records
    compared = [r for r in records if "ratio" in r]
    assert {(r["recipe"], r["precision"]) for r in compared} == {
        (rec, p) for rec in ("base", "v2_rope_rmsnorm") for p in ("fp32", "bf16")
    }
    for r in compared:
        t2, peer = r["t2_tokens_per_s"], r["marian_tokens_per_s"]
        assert len(t2) == len(peer) == 2  # one figure per timed round
        assert r["ratio"] == pytest.approx(statistics.median(t2) / statistics.median(peer))
        assert r["ratio_rounds"] == pytest.approx([a / b for a, b in zip(t2, peer, strict=True)])
        assert r["t2_peak_mib"] >= 0 and r["matmul_flops_per_s"] > 0
        assert r["mfu"] is None  # no GPU of known peak here
        assert all(f > 0 for f in r["t2_flops_per_s"])
    phases = [r["breakdown"] for r in records if "breakdown" in r]
    assert len(phases) == 4
    for b in phases:
        assert b["step"] >= max(b["forward"], b["backward"], b["optimizer"])


@needs_data
def test_bench_train_times_each_mode_in_turn_and_writes_it_before_the_next(
    tmp_path, single_thread, monkeypatch
):
    """--modes: each t2 mode against the peer in rounds of its own, on the same pre-drawn
    batches cycled, every one seen twice before timing (so that CUDA graphs replay every
    timed step), its record on disk as soon as it is measured: a mode cut short (here the
    third one's warm-up is interrupted, as a time limit would) loses only itself. Dynamo's
    eager backend here: no C++ build."""
    bench, modes = load("bench_train"), load("train_modes")
    warm_up = modes._warm_up

    def cut_short(engine, cycle, args, cfg):  # noqa: ANN001, ANN202
        if engine.name == "t2-graphs":
            raise KeyboardInterrupt  # as the time limit's signal would end the process
        return warm_up(engine, cycle, args, cfg)

    monkeypatch.setattr(modes, "_warm_up", cut_short)
    out = tmp_path / "train.json"
    argv = train_argv(
        *("--max-tokens", "200", "--rounds", "2", "--steps-per-round", "1", "--batches", "2"),
        *("--precisions", "fp32", "--recipes", "base", "--modes", "eager,compiled,graphs"),
        *("--set", "train.compile_backend=eager", "--json", str(out)),
    )
    with pytest.raises(KeyboardInterrupt):
        bench.main(argv)
    by = {r["engine"]: r for r in json.loads(out.read_text())}
    assert set(by) == {"t2-eager", "t2-compiled"}
    for r in by.values():
        assert (r["batches"], r["sightings_before_timing"], r["timed_steps"]) == (2, 2, 2)
        assert 1 <= r["shapes"] <= 2
        assert len(r["t2_host_ms_per_step"]) == len(r["marian_tokens_per_s"]) == 2
        assert r["t2_recompiles"] == 0 and r["t2_gpu_ms_per_step"] is None
        assert r["host_below_gpu"] is None  # no GPU: nothing to compare the host with
        assert r["t2_reserved_mib"] is None and r["marian_reserved_mib"] is None  # CUDA's only
    assert by["t2-eager"]["t2_compiled"] is False
    compiled = by["t2-compiled"]
    assert compiled["t2_compiled"] and compiled["t2_fallback"] is None
    assert compiled["t2_compile_s"] > 0 and compiled["t2_compile_from"] == "no compile cache"
    assert not compiled["t2_cuda_graphs"] and compiled["t2_cudagraph_skips"] == 0


def test_a_cycle_serves_the_pre_drawn_batches_in_turn_and_counts_their_sightings():
    import torch

    cycle_type = load("train_modes").Cycle
    batches = [{"src": torch.zeros(2, n), "tgt_in": torch.zeros(2, 5)} for n in (3, 4, 3)]
    cycle = cycle_type(batches)
    served = [next(cycle) for _ in range(7)]
    assert all(a is b for a, b in zip(served, batches * 3, strict=False))
    assert (cycle.sightings, cycle.shapes) == (2, 2)
    aligned = cycle_type(batches, cycle.served)  # the peer's, at the engine's position
    assert next(aligned) is next(cycle) is batches[1]


def test_the_graph_probe_counts_the_cuda_graph_trees_calls_and_puts_them_back():
    """Warm-ups, recordings and replays are counted where torch's CUDA-graph trees make
    them (the methods wrapped call through), and the methods are restored on exit."""
    import types

    import torch._inductor.cudagraph_trees as trees

    probe_type = load("graph_probe").GraphProbe
    original = trees.CUDAGraphNode.run_graph
    replayed = []
    node = types.SimpleNamespace(graph=types.SimpleNamespace(replay=lambda: replayed.append(1)))
    with probe_type() as probe:
        before = probe.counts()
        trees.CUDAGraphNode.run_graph(node)
        trees.CUDAGraphNode.run_graph(node)
        counts = probe.counts() - before
    assert replayed == [1, 1] and (counts.replays, counts.recordings, counts.warmups) == (2, 0, 0)
    assert trees.CUDAGraphNode.run_graph is original


def test_the_graph_probe_records_a_cuda_graph_skip_and_torchs_reason(single_thread):
    """A real skip: the cudagraphs backend given CPU tensors, as it would be given a
    mutated input or a CPU op on a GPU; counted, with the reason torch logged."""
    import torch

    probe_type = load("graph_probe").GraphProbe
    torch._dynamo.reset()
    with probe_type() as probe:
        step = torch.compile(lambda x: (x * 2).sin().sum(), backend="cudagraphs")
        step(torch.randn(4, requires_grad=True)).backward()
        counts = probe.counts()
    assert counts.skips == 1 and len(counts.reasons) == 1, counts
    assert counts.reasons[0].startswith("skipping cudagraphs due to") and "cpu" in counts.reasons[0]


def test_bench_train_refuses_an_unknown_mode(capsys):
    with pytest.raises(SystemExit):
        load("bench_train").parse_args(["--modes", "eager,jit"])
    assert (
        "unknown mode 'jit'; valid: auto or eager, compiled, graphs, flex"
        in capsys.readouterr().err
    )


@needs_data
def test_bench_train_scaling_rows_grow_as_configured(tmp_path, single_thread, monkeypatch):
    bench = load("bench_train")
    monkeypatch.setattr(  # bench_train's --scaling table (benchmarks/train_scaling.py)
        load("train_scaling"),
        "SCALING",
        (("batch tokens", "base", 64, 8), ("sentence length", "base", 64, 16)),
    )
    argv = train_argv(
        "--rounds", "2", "--precisions", "fp32", "--recipes", "base", "--scaling", pairs=300
    )
    rows = [r for r in bench.main(argv) if "scaling" in r]
    assert [(r["max_tokens"], r["length"]) for r in rows] == [(64, 8), (64, 16)]
    for r in rows:  # no padding: 64 // length pairs of length tokens a side
        assert r["tokens_per_s"] > 0 and r["flops_per_s"] > 0 and r["parameters"] > 0


@needs_data
def test_bench_train_counts_operators_per_step_on_cuda_s_code_path(single_thread):
    """Both architectures' records gain t2's and the peer's operators per step; on the
    simulated CUDA path t2 dispatches fewer than the peer's plain loop (the target)."""
    bench = load("bench_train")
    argv = train_argv("--rounds", "0", "--precisions", "bf16", "--count-ops", pairs=300)
    rows = [r for r in bench.main(argv) if "ops_per_step" in r]
    assert [r["recipe"] for r in rows] == ["base", "v2_rope_rmsnorm"]
    for r in rows:
        assert r["ops_code_path"] == "CUDA's code path, simulated on a CPU"
        assert 0 < r["ops_per_step"] <= r["peer_ops_per_step"], r
        assert r["ops_per_step_with_views"] > r["ops_per_step"]
        assert r["kernels_per_step"] is None  # no GPU: no profiler count
    assert rows[0]["counted_as_on_cuda"] == {}  # base has no RMSNorm
    fused = rows[1]["counted_as_on_cuda"]  # v2's RMSNorms: one fused kernel each way
    assert fused["aten._fused_rms_norm (as on CUDA)"] == 5  # 1 + 1 layers: 2 + 3 norms
    assert fused["aten._fused_rms_norm_backward (as on CUDA)"] == 5


def test_the_benchmark_loop_prepares_its_model_with_train_pys_own_function():
    """What training applies to a model (cast-once weights, optimizer, DDP, compilation)
    lives in t2.train.setup.prepare_training; the benchmark's loop calls that function,
    not a copy of it, so the two cannot drift."""
    import inspect

    loops = load("train_loops")
    from t2.train import setup

    assert loops.prepare_training is setup.prepare_training
    assert "prepare_training(" in inspect.getsource(loops.T2Engine.__init__)
    assert "build_optimizer" not in inspect.getsource(loops.T2Engine)


def tiny_loop_inputs(n: int = 2):
    """A tiny Config and `n` served host batches of (2, 5) tokens."""
    import torch

    from t2.config import Config, ModelConfig

    model = ModelConfig(
        vocab_size=40, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1
    )
    g = torch.Generator().manual_seed(0)
    served = [
        {k: torch.randint(3, 40, (2, 5), generator=g) for k in ("src", "tgt_in", "tgt_out")}
        for _ in range(n)
    ]
    return Config(model=model), served


def test_both_loops_count_the_batch_the_loader_served_on_the_host(single_thread, monkeypatch):
    """bench_train's timed round counts each step's tokens and FLOPs from the batch it
    returns: for both engines that is the loader's own batch, on the host, so counting it
    never waits for the GPU (reading a device tensor is a host sync, which would slow one
    side's figures and not the other's); a device batch is refused in one line."""
    loops = load("train_loops")
    cfg, served = tiny_loop_inputs()
    counted = []
    count = loops.batch_flops
    monkeypatch.setattr(loops, "batch_flops", lambda c, b: counted.append(b) or count(c, b))
    for engine in (loops.T2Engine, loops.MarianEngine):
        counted.clear()
        loops.run_round(engine(cfg, None, None, "fp32", iter(served)), 2, cfg, None, False)
        assert len(counted) == 2, engine
        for was, seen in zip(served, counted, strict=True):
            assert seen is was and all(seen[k] is was[k] for k in was), engine.name
    on_device = {k: v.to("meta") for k, v in served[0].items()}  # meta: a device's stand-in
    with pytest.raises(ValueError, match="counts the loader's batch on the host"):
        count(cfg, on_device)


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
