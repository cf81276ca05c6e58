"""Smoke tests of the training benchmarks (bench_train, its scaling table and op counts, the
loop it shares with train.py): a tiny configuration runs end to end and prints consistent
figures (no timing is asserted; benchmarks measure, tests do not)."""

from __future__ import annotations

import json
import statistics

import pytest
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
def test_bench_train_times_each_mode_of_the_training_pass_against_the_peer(single_thread):
    """--modes: eager and compiled t2 (dynamo's eager backend here: no C++ build) each get
    a record against the same peer rounds, with host time per step and no recompilation
    once warm (the batch and length dimensions are symbolic)."""
    argv = train_argv(
        "--max-tokens",
        "200",
        "--rounds",
        "2",
        "--steps-per-round",
        "1",
        "--precisions",
        "fp32",
        "--recipes",
        "base",
        "--modes",
        "eager,compiled",
        "--set",
        "train.compile_backend=eager",
    )
    records = load("bench_train").main(argv)
    by = {r["engine"]: r for r in records}
    assert set(by) == {"t2-eager", "t2-compiled"}
    assert by["t2-eager"]["marian_tokens_per_s"] == by["t2-compiled"]["marian_tokens_per_s"]
    for r in by.values():
        assert len(r["t2_host_ms_per_step"]) == 2 and min(r["t2_host_ms_per_step"]) > 0
        assert r["t2_recompiles"] == 0 and r["t2_gpu_ms_per_step"] is None
        assert r["host_below_gpu"] is None  # no GPU: nothing to compare the host with


def test_bench_train_refuses_an_unknown_mode(capsys):
    with pytest.raises(SystemExit):
        load("bench_train").parse_args(["--modes", "eager,jit"])
    assert "unknown mode 'jit'; valid: auto or eager, compiled, graphs" in capsys.readouterr().err


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
