"""Smoke tests of the training benchmarks (bench_train, its scaling table and op counts, the
loop it shares with train.py): a tiny configuration runs end to end and prints consistent
figures (no timing is asserted; benchmarks measure, tests do not)."""

from __future__ import annotations

import json
import statistics

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
