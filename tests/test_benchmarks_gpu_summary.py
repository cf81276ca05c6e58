"""benchmarks/gpu_summary.py, checked on a CPU: flagged, missing or odd rows read n/a with
the reason, never a ratio, and a second run into one folder reports only its own figures."""

from __future__ import annotations

import json
import sys

from test_benchmarks import load


def flagged_rows() -> list[dict]:
    """Training records as bench_train writes them: a clean graphs row, a compiled row
    that fell back, a graphs row that skipped, one that timed no replay."""
    common = {"recipe": "base", "precision": "bf16", "mfu": 0.3, "t2_recompiles": 0}
    graphs = {
        **common,
        "engine": "t2-graphs",
        "ratio": 2.1,
        "t2_host_ms_per_step": [9.0, 11.0, 10.0],
        "t2_gpu_ms_per_step": 40.5,
        "t2_compiled": True,
        "t2_compile_s": 95.0,
        "t2_compile_from": "compiled, saved to the compile cache /c",
        "t2_fallback": None,
        "t2_cuda_graphs": True,
        "t2_graph_replays_timed": 12,
        "t2_graph_recordings_timed": 0,
        "t2_cudagraph_skips": 0,
        "timed_steps": 6,
        "shapes": 4,
        "sightings_before_timing": 2,
    }
    fell_back = {
        **graphs,
        "engine": "t2-compiled",
        "ratio": 1.2,
        "t2_cuda_graphs": False,
        "t2_fallback": "InductorError: no ptxas",
    }
    skipped = {
        **graphs,
        "recipe": "v2_rope_rmsnorm",
        "t2_cudagraph_skips": 1,
        "t2_cudagraph_skip_reasons": ["skipping cudagraphs due to mutated inputs (2 instances)"],
        "t2_graph_replays_timed": 0,
    }
    flex = {**graphs, "engine": "t2-flex", "ratio": 0.6, "t2_cuda_graphs": False}
    return [graphs, fell_back, skipped, flex]


def test_gpu_summary_flags_compiled_rows_that_fell_back_skipped_or_replayed_nothing(tmp_path):
    summary = load("gpu_summary")
    graphs, fell_back, skipped, flex = flagged_rows()
    assert summary.row_flags(graphs) == []
    assert summary.compiled_line(graphs) == (
        "first compiled micro-batch 95.0 s (compiled, saved to the compile cache /c); 12 "
        "CUDA-graph replays in 6 timed steps (4 shapes, each seen 2x before timing)"
    )
    assert summary.row_flags(fell_back) == ["FELL BACK TO EAGER: InductorError: no ptxas"]
    assert summary.row_flags(skipped) == [
        "CUDA GRAPHS SKIPPED (1): skipping cudagraphs due to mutated inputs (2 instances)",
        "NO CUDA-GRAPH REPLAY TIMED",
    ]
    assert summary.row_flags({**graphs, "t2_graph_replays_timed": None}) == [
        "CUDA-GRAPH REPLAYS NOT COUNTABLE with this torch"
    ]
    assert summary.row_flags({**graphs, "t2_recompiles": 2}) == ["2 RECOMPILES WHILE TIMED"]
    (tmp_path / "train-base.json").write_text(json.dumps([graphs, fell_back, flex]))
    (tmp_path / "train-v2.json").write_text(json.dumps([skipped]))
    md = summary.markdown(summary.summarize(tmp_path))
    assert "| t2-graphs / peer tokens/s, base bf16 | 2.10x, MFU 30.0%, host 10.0 ms" in md
    # a flagged row states no ratio: n/a, because its flags
    assert (
        "| t2-compiled / peer tokens/s, base bf16 | n/a, because FELL BACK TO EAGER: "
        "InductorError: no ptxas |" in md
    )
    assert (
        "| t2-graphs / peer tokens/s, v2_rope_rmsnorm bf16 | n/a, because CUDA GRAPHS SKIPPED" in md
    )
    assert "1.20x" not in md and "0.50x" not in md  # fell back: no flex / sdpa ratio either
    assert (
        "flex / sdpa tokens/s (via the peer) | n/a, because the compiled row is flagged: FELL "
        "BACK TO EAGER" in md
    )


def test_flex_against_sdpa_is_a_ratio_only_when_both_rows_are_clean_and_present():
    summary = load("gpu_summary")
    graphs, fell_back, _, flex = flagged_rows()
    sdpa = {**graphs, "engine": "t2-compiled", "ratio": 1.2, "t2_cuda_graphs": False}
    flex_fell_back = {**flex, "t2_fallback": "InductorError: no ptxas"}
    planned = [{"part": "train-base-flex", "modes": ["compiled"], "dropped": ["flex"]}]
    planned[0]["outcome"] = "done in 80 s; dropped for time: flex"
    ratio = summary.flex_against_sdpa([sdpa, flex], [])
    assert ratio == ["| padded attention, base bf16: flex / sdpa tokens/s (via the peer) | 0.50x |"]
    (line,) = summary.flex_against_sdpa([sdpa, flex_fell_back], [])
    assert "n/a, because the flex row is flagged: FELL BACK TO EAGER" in line and "x |" not in line
    (line,) = summary.flex_against_sdpa([sdpa], planned)  # the flex part dropped its mode
    assert "n/a, because the flex row is missing; train-base-flex: done in 80 s; dropped" in line
    assert summary.flex_against_sdpa([sdpa], []) == []  # no flex asked for, none said
    # gpu.sh --quick's pair: flex with CUDA graphs over train-base's graphs row
    with_graphs = {**flex, "engine": "t2-flex-graphs", "t2_cuda_graphs": True, "ratio": 1.05}
    assert summary.flex_against_sdpa([graphs, with_graphs], []) == [
        "| padded attention, base bf16: flex-graphs / sdpa with CUDA graphs tokens/s (via the "
        "peer) | 0.50x |"
    ]
    planned = [{"part": "train-base-flex", "modes": [], "dropped": ["flex-graphs"]}]
    planned[0]["outcome"] = "skipped: 12 s left, it needed about 103; lost flex-graphs"
    (line,) = summary.flex_against_sdpa([graphs], planned)
    assert "n/a, because the flex-graphs row is missing; train-base-flex: skipped" in line


def test_odd_figures_read_n_a_never_a_ratio_or_a_crash():
    """NaN, infinite, zero or negative figures (review of issue 54): n/a, with the reason."""
    summary = load("gpu_summary")
    graphs, _, _, flex = flagged_rows()
    sdpa = {**graphs, "engine": "t2-compiled", "ratio": 1.2, "t2_cuda_graphs": False}
    for bad in (float("nan"), float("inf"), 0.0, None):
        (line,) = summary.flex_against_sdpa([{**sdpa, "ratio": bad}, flex], [])
        assert "n/a, because the compiled row is flagged: TOKENS/S RATIO NOT A POSITIVE" in line
    row = {**sdpa, "mfu": float("nan"), "peak_memory_ratio": float("nan")}
    assert "MFU n/a" in summary._speed(row) and "peak memory n/a" in summary._speed(row)
    fell_back = {**flex, "t2_torch_fallbacks": ["note: torch 2.11: no block masks: SDPA"]}
    (line,) = summary.flex_against_sdpa([sdpa, fell_back], [])  # a flex row that ran SDPA
    assert "n/a, because the flex row is flagged: TORCH LACKED, T2 FELL BACK" in line
    negative = {**graphs, "t2_reserved_mib": -20, "marian_reserved_mib": 0}
    assert "reserved memory n/a" in summary.memory(negative)


def test_a_second_run_into_one_folder_reports_only_its_own_figures(tmp_path):
    """The parts' files of an earlier run in OUT are removed before this run's parts run or
    are skipped: a skipped part's old row is not reported as this run's (review of 54)."""
    plan = load("gpu_plan")
    stale = [p.name for p in [*plan.QUICK.warm, *plan.QUICK.timed]][:2]
    for name in stale:
        (tmp_path / f"{name}.json").write_text("{}")
        (tmp_path / f"{name}.txt").write_text("old")
    plan.run_plan(plan.QUICK, tmp_path, 0.0, lambda: 10.0, lambda batch: [], lambda *a: [])
    assert not any((tmp_path / f"{n}{s}").exists() for n in stale for s in (".json", ".txt"))


def test_graphs_rows_report_reserved_memory_not_a_peak_the_replays_miss():
    summary = load("gpu_summary")
    graphs, *_ = flagged_rows()
    eager = {**graphs, "engine": "t2-eager", "t2_cuda_graphs": False, "t2_compiled": False}
    eager |= {"t2_peak_mib": 5906.3, "peak_memory_ratio": 0.64}
    assert summary.memory(eager) == "peak 5,906 MiB, 0.64x the peer's"
    with_graphs = {**graphs, "t2_peak_mib": 100.0, "peak_memory_ratio": 0.01}
    assert (
        summary.memory(with_graphs) == "reserved memory n/a (CUDA graphs: the peak misses replays)"
    )
    with_graphs |= {"t2_reserved_mib": 7168.0, "marian_reserved_mib": 10240.0}
    assert summary.memory(with_graphs) == (
        "reserved 7,168 MiB with the graphs' pool, 0.70x the peer's (the peak misses replays)"
    )
    assert "0.01" not in summary._speed(with_graphs)


def test_gpu_summary_reports_what_ran_and_names_what_is_missing(tmp_path, monkeypatch):
    summary = load("gpu_summary")
    (tmp_path / "device.txt").write_text("2026-11-25\ncommit abc123\nNVIDIA H100, 81559 MiB\n")
    (tmp_path / "tests.txt").write_text("....\n4 passed in 3.1s\n")
    outcome = load("gpu_plan").Outcome
    parts = [
        outcome("tests", 300, 90, 135, 31, "0"),
        outcome("quickstart", 269, 40, 60, 58, "1"),
        outcome("train-v2", 211, 95, 159, 159, "124", ("eager", "graphs"), ("compiled",)),
        outcome("train-big", 40, 106, 0, 0, "skipped", (), ("eager", "graphs")),
    ]
    (tmp_path / "parts.tsv").write_text("".join(p.line() for p in parts))
    (tmp_path / "train-v2.json").write_text(
        json.dumps([{"recipe": "v2", "precision": "bf16", "ratio": 0.8, "engine": "t2-eager"}])
    )
    (tmp_path / "train.json").write_text(
        json.dumps([{"recipe": "base", "precision": "bf16", "ratio": 1.1, "mfu": 0.15}])
    )
    (tmp_path / "ops.json").write_text(
        json.dumps(
            [
                {
                    "recipe": "base",
                    "precision": "bf16",
                    "ops_per_step": 900,
                    "kernels_per_step": 700,
                    "peer_ops_per_step": 1500,
                    "peer_kernels_per_step": 1200,
                    "casts_per_step": 12,
                    "peer_casts_per_step": 300,
                }
            ]
        )
    )
    monkeypatch.setattr(sys, "argv", ["gpu_summary.py", str(tmp_path)])
    summary.main()
    md = (tmp_path / "summary.md").read_text()
    assert "NVIDIA H100" in md and "| CUDA tests | 4 passed in 3.1s |" in md
    assert "| part: tests | done in 31 s |" in md
    assert "| part: train-big | skipped: 40 s left, it needed about 106; lost eager, graphs |" in md
    assert "| part: train-v2 | cut short at its 159 s limit (what it wrote before is kept); " in md
    assert "lost graphs; dropped for time: compiled |" in md  # a cut part names what it lost
    assert (
        "| t2-graphs / peer tokens/s, train-v2 | n/a, because train-v2 was cut at its 159 s "
        "limit before this mode finished |" in md
    )
    assert "| t2-compiled / peer tokens/s, train-v2 | n/a, because it was dropped for time" in md
    assert "| t2-eager / peer tokens/s, train-big | n/a, because train-big was skipped" in md
    assert "| t2 / peer tokens/s, base bf16 | 1.10x, MFU 15.0%, host n/a" in md
    assert "900 (700) / 1500 (1200)" in md
    assert "`_to_copy` per eager step, base: t2 / peer | 12 / 300" in md
    assert "| part: quickstart | failed (exit 1) after 58 s: see its .txt |" in md
    assert "| quickstart | missing |" in md and "mixed" not in md  # not a part of this run
    assert json.loads((tmp_path / "summary.json").read_text())["memory_model"] is None
