"""The GPU session's tooling, checked on a CPU: benchmarks/gpu.sh's failure exits and its
parts' time budget, what --prepare carries (benchmarks/gpu_prepare.py) and the summary's
flags (benchmarks/gpu_summary.py). The figures themselves need a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from test_benchmarks import ROOT, SHARED, load

GPU_SH = ROOT / "benchmarks" / "gpu.sh"


def gpu_sh(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(GPU_SH), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is here")
def test_gpu_script_without_cuda_fails_in_one_line():
    """No CUDA device must not read as success: one line, a non-zero exit."""
    done = gpu_sh("--quick")
    assert done.returncode == 4 and done.stdout == "", done.stderr
    assert done.stderr.count("\n") == 1 and "error: no CUDA device visible to torch" in done.stderr


def test_gpu_script_fails_in_one_line_without_python_or_a_torch_that_imports(tmp_path):
    (tmp_path / "torch.py").write_text("raise ImportError('this torch is broken')\n")
    broken = gpu_sh(PYTHONPATH=str(tmp_path))
    assert broken.returncode == 3 and broken.stdout == ""
    assert broken.stderr.count("\n") == 1 and "torch does not import" in broken.stderr
    assert "this torch is broken" in broken.stderr
    none = gpu_sh(PYTHON=str(tmp_path / "no-python"))
    assert none.returncode == 2 and "error: no Python found at" in none.stderr
    for bad, why in ((["--frobnicate"], "unknown option --frobnicate"), (["--budget", "1m"], "")):
        done = gpu_sh(*bad)
        assert done.returncode == 2 and why in done.stderr and done.stderr.count("\n") == 1


def test_gpu_parts_keep_to_the_budget_and_the_summary_names_each_outcome(tmp_path):
    """A part runs under its limit cut to the time left, a part that overruns is cut (its
    exit 124), a failure does not stop the run, and a part with too little time left is
    skipped and said to be (gpu.sh's --quick drops big, last, so)."""
    script = f"""
    out={tmp_path}; budget=4; start=$SECONDS; : > "$out/parts.tsv"
    source {ROOT / "benchmarks" / "gpu_parts.sh"}
    part fits 10 1 echo hello
    part overruns 2 1 sleep 30
    part fails 10 1 false
    part big 10 3 echo never
    """
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    summary = load("gpu_summary")
    rows = {r["part"]: r for r in summary.parts(tmp_path)}
    assert [rows[p]["status"] for p in rows] == ["0", "124", "1", "skipped"]
    assert (tmp_path / "fits.txt").read_text() == "hello\n" and "== big skipped" in done.stdout
    outcomes = {name: summary.part_outcome(row) for name, row in rows.items()}
    assert outcomes["overruns"].startswith("cut short at its 2 s limit")
    assert outcomes["fails"].startswith("failed (exit 1)")
    assert outcomes["big"] == "skipped: no time left in the budget"


def test_prepare_carries_only_the_pinned_wheels_the_gpu_image_lacks(tmp_path):
    prepare = load("gpu_prepare")
    specs = prepare.pins()
    assert [s.split("==")[0] for s in specs] == ["datasets", "dill", "multiprocess", "xxhash"]
    assert all(s.split("==")[1] for s in specs)  # each pinned by constraints.txt
    commands = prepare.download_commands(specs, ["3.11", "3.12"], tmp_path)
    assert len(commands) == 2
    for command, version in zip(commands, ("3.11", "3.12"), strict=True):
        assert "--no-deps" in command and "--only-binary=:all:" in command
        assert command[command.index("--python-version") + 1] == version
        assert command[-len(specs) :] == specs  # nothing else: numpy, pyarrow, pandas stay
    bad = tmp_path / "constraints.txt"
    bad.write_text("dill==0.4.1\n")
    with pytest.raises(prepare.T2Error, match="pins no datasets, multiprocess, xxhash"):
        prepare.pins(bad)


def test_prepare_installs_into_a_folder_of_its_own_and_only_what_is_missing(tmp_path, monkeypatch):
    prepare = load("gpu_prepare")
    command = prepare.install_command(tmp_path / "wheels", tmp_path / "site", ["xxhash"])
    assert command[:4] == [sys.executable, "-m", "pip", "install"]
    assert {"--no-index", "--no-deps"} <= set(command) and command[-1] == "xxhash"
    assert command[command.index("--target") + 1] == str(tmp_path / "site")
    assert prepare.install(tmp_path / "no-wheels", tmp_path / "site") == []  # all import here
    monkeypatch.setattr(prepare, "missing", lambda: ["datasets"])
    with pytest.raises(prepare.T2Error, match="datasets not installed and no wheel folder"):
        prepare.install(tmp_path / "no-wheels", tmp_path / "site")


@pytest.mark.skipif(not (SHARED / "mixed" / "train.de").is_file(), reason="no shared data")
def test_prepared_data_and_wheels_fit_the_limit_and_an_excess_is_refused(tmp_path):
    prepare = load("gpu_prepare")
    data, wheels = tmp_path / "gpu-data", tmp_path / "gpu-wheels"
    prepare.copy_data(SHARED, data)
    assert sorted(str(p.relative_to(data)) for p in data.rglob("*.*")) == sorted(prepare.DATA_FILES)
    wheels.mkdir()
    with open(wheels / "wheels.whl", "wb") as f:  # the wheels of four Pythons: ~3.1 MiB
        f.truncate(4 << 20)
    assert prepare.check_size(wheels, data) < prepare.LIMIT
    with open(wheels / "wheels.whl", "wb") as f:
        f.truncate(prepare.LIMIT)
    with pytest.raises(prepare.T2Error, match="over the 40 MiB that may travel"):
        prepare.check_size(wheels, data)


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
    assert "| t2-compiled (flagged) / peer tokens/s, base bf16 | 1.20x" in md
    assert "FELL BACK TO EAGER: InductorError: no ptxas |" in md
    assert "| t2-graphs (flagged) / peer tokens/s, v2_rope_rmsnorm bf16 | 2.10x" in md
    assert "| padded attention, base bf16: flex / sdpa tokens/s (via the peer) | 0.50x |" in md


def test_gpu_summary_reports_what_ran_and_names_what_is_missing(tmp_path, monkeypatch):
    summary = load("gpu_summary")
    (tmp_path / "device.txt").write_text("2026-11-25\ncommit abc123\nNVIDIA H100, 81559 MiB\n")
    (tmp_path / "tests.txt").write_text("....\n4 passed in 3.1s\n")
    parts = "tests\t90\t31\t0\nquickstart\t60\t58\t1\ntrain-big\t90\t0\tskipped\n"
    (tmp_path / "parts.tsv").write_text(parts)
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
    assert "| part: train-big | skipped: no time left in the budget |" in md
    assert "| t2 / peer tokens/s, base bf16 | 1.10x, MFU 15.0%, host n/a" in md
    assert "900 (700) / 1500 (1200)" in md
    assert "`_to_copy` per eager step, base: t2 / peer | 12 / 300" in md
    assert "| part: quickstart | failed (exit 1) after 58 s: see its .txt |" in md
    assert "| quickstart | missing |" in md and "mixed" not in md  # not a part of this run
    assert json.loads((tmp_path / "summary.json").read_text())["memory_model"] is None
