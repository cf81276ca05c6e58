"""Smoke tests: a tiny configuration of each benchmark script runs end to end and prints
consistent figures (no timing is asserted; benchmarks measure, tests do not)."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("T2_SHARED_DATA", ROOT.parent / "shared" / "data"))
needs_data = pytest.mark.skipif(
    not (SHARED / "newstest" / "newstest2013.de").is_file()
    or not (SHARED / "mixed" / "train.de").is_file(),
    reason=f"shared de-en data not found at {SHARED} (set T2_SHARED_DATA)",
)
TINY = [
    "--set",
    "model.d_model=32",
    "--set",
    "model.n_heads=2",
    "--set",
    "model.d_ff=64",
    "--set",
    "model.n_encoder_layers=1",
    "--set",
    "model.n_decoder_layers=1",
]


def load(name: str):
    """A benchmark module (benchmarks/ is a package of the checkout: `python -m pytest` and
    `python -m benchmarks.NAME` from the checkout's root find it)."""
    return importlib.import_module(f"benchmarks.{name}")


@needs_data
def test_bench_serve_times_every_engine_on_equal_work(tmp_path, single_thread, capsys):
    pytest.importorskip("ctranslate2")
    out = tmp_path / "serve.json"
    argv = [
        "--threads",
        "1",
        "--sentences",
        "6",
        "--repeats",
        "2",
        "--vocab",
        "300",
        "--max-len",
        "5",
        "--batch-size",
        "3",
        "--json",
        str(out),
        *TINY,
    ]
    records = load("bench_serve").main(argv)
    assert json.loads(out.read_text()) == records
    engines = {(r["recipe"], r["engine"]) for r in records}
    assert engines == {
        (rec, e)
        for rec in ("base", "v2_rope_rmsnorm")
        for e in ("hf", "t2", "hf_bf16", "t2_bf16", "ct2_float32", "ct2_int8")
    }
    assert {r["tokens"] for r in records} == {6 * (5 + 1)}  # every engine: 5 tokens + EOS each
    for r in records:
        assert len(r["walls_s"]) == 2 and r["tokens_per_s"] == pytest.approx(
            r["tokens"] / r["median_s"]
        )
        assert r["engine"] != "hf" or r["ratio_to_hf"] == 1.0
        peer = "hf_bf16" if r["engine"].endswith("_bf16") else "hf"
        assert r["peer"] == peer and r["ratio_to_hf_same_precision"] == pytest.approx(
            next(
                p["median_s"] for p in records if (p["recipe"], p["engine"]) == (r["recipe"], peer)
            )
            / r["median_s"]
        )
    v2 = next(r for r in records if r["recipe"] == "v2_rope_rmsnorm")
    assert (v2["positional"], v2["norm"], v2["ffn"]) == ("rope", "rmsnorm", "swiglu")
    assert "ct2_int8" in capsys.readouterr().out


def test_bench_serve_rejects_an_unknown_engine(capsys):
    with pytest.raises(SystemExit):
        load("bench_serve").parse_args(["--engines", "t2,onnx"])
    assert (
        "unknown engine 'onnx'; valid: hf, t2, hf_bf16, t2_bf16, ct2_float32, ct2_int8, "
        "ct2_peer_float32, ct2_peer_int8" in capsys.readouterr().err
    )
    for spec, why in (
        ("ct2_int8@0", "'ct2_int8@0': the number of workers after @ must be"),
        ("hf@two", "'hf@two': the number of workers after @ must be"),
        ("onnx@2", "unknown engine 'onnx'"),
    ):
        with pytest.raises(SystemExit):
            load("bench_serve").parse_args(["--engines", spec])
        assert why in capsys.readouterr().err
    with pytest.raises(SystemExit):
        load("bench_serve").parse_args(
            [
                "--engines",
                "ct2_peer_int8",
                "--trained",
                "r",
                "--peer",
                "p",
                "--src",
                "s",
                "--ref",
                "r",
            ]
        )
    assert "'ct2_peer_int8' is for random weights" in capsys.readouterr().err


@needs_data
def test_bench_serve_runs_engines_on_workers_with_the_same_work(tmp_path, single_thread):
    """ENGINE@N: HF and t2 on N processes, CTranslate2 on N of its workers; the same tokens
    are emitted, and the worker processes are gone afterwards. ct2_peer_int8: the HF peer
    converted by CTranslate2's own converter decodes the same work."""
    pytest.importorskip("ctranslate2")
    import multiprocessing

    argv = [
        "--threads",
        "2",
        "--sentences",
        "7",
        "--repeats",
        "1",
        "--vocab",
        "300",
        "--max-len",
        "4",
        "--batch-size",
        "2",
        "--recipes",
        "base",
        "--engines",
        "hf,t2@2,ct2_peer_int8,hf@2,ct2_int8@2,ct2_int8",
        *TINY,
    ]
    records = load("bench_serve").main(argv)
    by = {r["engine"]: r for r in records}
    assert list(by) == ["hf", "hf@2", "t2@2", "ct2_int8", "ct2_int8@2", "ct2_peer_int8"]
    assert {r["tokens"] for r in records} == {7 * (4 + 1)}
    assert [r["workers"] for r in records] == [1, 2, 2, 1, 2, 1]
    assert by["t2@2"]["peer"] == "hf" and by["hf@2"]["ratio_to_hf"] == pytest.approx(
        by["hf"]["median_s"] / by["hf@2"]["median_s"]
    )
    assert not multiprocessing.active_children()  # the pools were closed and joined


def test_bench_serve_times_trained_models_decoding_freely(tmp_path, toy, single_thread):
    """--trained: t2's checkpoint, its CTranslate2 exports and a saved MarianMTModel decode
    real sentences freely; each engine's output tokens, rate and BLEU are reported."""
    pytest.importorskip("ctranslate2")
    from toy_task import toy_pairs

    serve = load("bench_serve")
    run_dir, model, tokenizer = toy
    peer = tmp_path / "peer"
    cfg = model.cfg
    shape = serve.argparse.Namespace(
        d_model=cfg.d_model, layers=cfg.n_encoder_layers, n_heads=cfg.n_heads, d_ff=cfg.d_ff
    )
    from transformers import MarianMTModel

    from benchmarks.bench_decode import marian_config

    MarianMTModel(marian_config(shape, len(tokenizer))).save_pretrained(peer / "model")
    tokenizer.save_pretrained(peer / "tokenizer")
    pairs = toy_pairs(7, 5)
    (tmp_path / "src.txt").write_text("\n".join(s for s, _ in pairs) + "\n", encoding="utf-8")
    (tmp_path / "ref.txt").write_text("\n".join(t for _, t in pairs) + "\n", encoding="utf-8")
    out = tmp_path / "trained.json"
    argv = [
        "--trained",
        str(run_dir),
        "--peer",
        str(peer),
        "--src",
        str(tmp_path / "src.txt"),
        "--ref",
        str(tmp_path / "ref.txt"),
        "--threads",
        "1",
        "--repeats",
        "2",
        "--batch-size",
        "4",
        "--json",
        str(out),
    ]
    records = serve.main(argv)
    assert json.loads(out.read_text()) == records
    by = {r["engine"]: r for r in records}
    assert set(by) == {"hf", "t2", "hf_bf16", "t2_bf16", "ct2_float32", "ct2_int8"}
    workers = serve.main([*argv[:-2], "--threads", "2", "--engines", "hf,t2,hf@2,t2@2,ct2_int8@2"])
    pooled = {r["engine"]: r for r in workers}
    for name in ("hf", "t2"):  # the same batches on two processes: the same translations
        alone, pool = pooled[name], pooled[f"{name}@2"]
        assert (pool["workers"], pool["tokens"], pool["bleu"]) == (
            2,
            alone["tokens"],
            alone["bleu"],
        )
    assert pooled["ct2_int8@2"]["bleu"] == by["ct2_int8"]["bleu"]
    assert by["hf"]["ratio_to_hf"] == 1.0 and by["t2_bf16"]["peer"] == "hf_bf16"
    for r in records:
        assert len(r["walls_s"]) == 2 and r["tokens"] > 0 and 0 <= r["bleu"] <= 100 + 1e-9
        assert r["tokens_per_s"] == pytest.approx(r["tokens"] / r["median_s"])
    # the trained toy model translates; its float32 export as t2 does (the untrained peer not)
    assert by["t2"]["bleu"] > 50 and abs(by["ct2_float32"]["bleu"] - by["t2"]["bleu"]) < 10
    assert abs(by["t2_bf16"]["bleu"] - by["t2"]["bleu"]) < 10


def test_bench_serve_trained_needs_its_inputs(capsys):
    with pytest.raises(SystemExit):
        load("bench_serve").parse_args(["--trained", "runs/x"])
    assert "--trained needs --peer, --src and --ref" in capsys.readouterr().err


def test_bench_serve_pool_stops_in_one_line_when_a_worker_dies():
    """A worker whose engine cannot be built exits; the run stops instead of waiting."""
    import multiprocessing

    serve = load("bench_serve")
    work = load("serve_trained")._trained_work  # built in the worker, where it fails
    pool = serve.Pool(work, ("t2", "/nonexistent/run", "", 1, None), 1, 1)
    with pytest.raises(SystemExit) as done:
        pool.map([(["Ein Satz."], None)])
    assert str(done.value.code) == (
        "error: worker 0 of a pool stopped (exit code 1); its error is printed above"
    )
    assert not multiprocessing.active_children()


def test_bench_data_reports_shapes_and_padding_of_each_batching(tmp_path, capsys):
    """One epoch per budget: t2's buckets (at most 64 shapes), its greedy batches and a
    plain DataLoader at the same pairs per batch, side by side in the JSON rows."""
    import argparse

    import datasets
    import numpy as np

    bench = load("bench_data")
    rng = np.random.default_rng(0)
    src = np.clip(rng.lognormal(2.6, 0.5, 3000).astype(int), 2, 66)
    tgt = np.clip(src + rng.integers(-3, 4, 3000), 3, 66)
    enc = datasets.Dataset.from_dict(
        {
            "src_ids": [[5] * n for n in src],
            "tgt_ids": [[5] * n for n in tgt],
            "src_len": src,
            "tgt_len": tgt,
        }
    )
    args = argparse.Namespace(
        max_tokens="1024,4096", max_tokens_per_sentence=64, json=tmp_path / "data.json"
    )
    bench._batching(enc, args)
    rows = json.loads((tmp_path / "data.json").read_text())
    assert [r["max_tokens"] for r in rows] == [1024] * 3 + [4096] * 3
    by = {(r["max_tokens"], r["batching"].split(",")[0]): r for r in rows}
    for budget in (1024, 4096):
        ours, plain = by[(budget, "t2 buckets")], by[(budget, "DataLoader")]
        assert ours["distinct_shapes"] <= 64 and ours["padding"] < 0.15
        assert plain["padding"] > ours["padding"] and plain["distinct_shapes"] > 10
        assert abs(plain["sentences_per_batch"] - ours["sentences_per_batch"]) < 2


@needs_data
@pytest.mark.slow
def test_bench_data_times_each_stage_against_the_limits(
    tmp_path, monkeypatch, capsys, single_thread
):
    """A round on a corpus of 300 joined pairs, the measurements run in this process: t2
    from raw files and from its cache, each stage's seconds and peak memory, and the raw
    encoder and trainer on the same texts, whose BPE is t2's."""
    import argparse

    bench, scale = load("bench_data"), load("data_scale")
    monkeypatch.setattr(bench, "child", lambda kind, args: scale.KINDS[kind](args))
    prefix = load("corpus").build(tmp_path / "corpus" / "train", 300)
    assert len(Path(f"{prefix}.de").read_text(encoding="utf-8").splitlines()) == 300
    args = argparse.Namespace(
        recipe="quickstart",
        set=[kv for kv in TINY if kv != "--set"],
        vocab_size=300,
        tokenizer_sample=200,
        max_tokens_per_sentence=None,
        fast_limit=False,
        limits=True,
    )
    figures = bench.repeat(prefix, tmp_path / "work", args)
    cold, warm = figures["t2 cold"], figures["t2 warm"]
    assert cold["record"]["tokenizer"] == {"sample_pairs": 200, "pairs": 300, "sample_seed": 2016}
    assert {"data train: read and clean", "data train: encode"} <= set(cold["stages"])
    assert "data train: encode" not in warm["stages"]  # read from the cache
    assert "data train: check the cache" in warm["stages"]
    assert figures["train"]["same"] and figures["train"]["texts"] == 400
    assert figures["encode"]["encode_batch"] > 0 and cold["peak_mb"] >= cold["peak_mb_data"]
    bench.report([figures])
    out = capsys.readouterr().out
    assert "encode_batch of every text" in out and "t2's BPE has the raw trainer's" in out


def test_bench_cli_times_help_screens_against_the_interpreter_and_torch(tmp_path, capsys):
    records = load("bench_cli").main(
        ["--rounds", "1", "--verbs", "train", "--json", str(tmp_path / "c.json")]
    )
    labels = [r["command"] for r in records]
    assert labels == ["python -c pass", "python -c 'import torch'", "t2 --help", "t2 train --help"]
    assert all(r["min_s"] <= r["median_s"] <= r["max_s"] for r in records)
    assert [("meets_target" in r) for r in records] == [False, False, True, True]
    assert json.loads((tmp_path / "c.json").read_text()) == records
    assert "t2 train --help" in capsys.readouterr().out


def test_bench_cli_refuses_an_unknown_verb():
    from t2.errors import ConfigError

    with pytest.raises(ConfigError, match="--verbs trian unknown"):
        load("bench_cli").parse_args(["--verbs", "train,trian"])


def test_bench_decode_kv_heads_measures_a_cache_smaller_by_the_heads_shared(single_thread):
    """--kv-heads: the same search with 4, 2 and 1 key/value heads of 4 query heads holds a
    measured cache 1/2 and 1/4 the reference's, greedy and in beam search."""
    import argparse

    decode_cache = load("decode_cache")
    args = argparse.Namespace(
        kv_heads="0,2,1",
        beams="1,2",
        d_model=32,
        n_heads=4,
        d_ff=64,
        layers=1,
        device="cpu",
        bf16=False,
        batch_size=2,
        repeats=1,
    )
    sources = [[5, 6, 7, 8, 2], [9, 10, 2], [11, 12, 13, 2]]
    records = decode_cache.kv_heads(args, 40, (sources, [3, 5, 4]))
    ratios = {(r["search"], r["kv_heads"]): r["cache_ratio"] for r in records}
    assert ratios == {
        (search, f"kv={n}"): n / 4 for search in ("greedy", "beam 2") for n in (4, 2, 1)
    }
    assert all(r["cache_mib"] > 0 and r["tokens_per_s"] > 0 for r in records)


def _imports(path: Path) -> set[str]:
    """The benchmarks modules `path` imports, at its top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found |= {n.split(".")[1] for n in names if n.startswith("benchmarks.")}
    return found


def test_no_benchmark_module_imports_itself_through_another():
    """benchmarks/ is a tree of imports (an import inside a function counts): what two
    modules share lives in a module below both, never in one of them."""
    folder = ROOT / "benchmarks"
    graph = {
        p.stem: _imports(p) & {q.stem for q in folder.glob("*.py")} for p in folder.glob("*.py")
    }
    assert graph["decode_cache"] and graph["bench_decode"]  # the graph is read, not empty

    def cycle_from(start: str, path: tuple[str, ...]) -> tuple[str, ...] | None:
        for nxt in sorted(graph[path[-1]]):
            if nxt == start:
                return (*path, nxt)
            if nxt not in path:
                found = cycle_from(start, (*path, nxt))
                if found:
                    return found
        return None

    cycles = [c for m in sorted(graph) if (c := cycle_from(m, (m,)))]
    assert not cycles, " -> ".join(cycles[0])
