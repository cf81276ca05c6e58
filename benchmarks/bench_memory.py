"""The training-memory model (t2.model.summary.estimate_memory, the batch planner's basis)
against measured peaks, at several model sizes, token budgets, sentence lengths and
precisions (docs/performance.md).

python -m benchmarks.bench_memory [--json FILE] [--quick]

Each case runs in a fresh process: the batches t2's planner assumes (rows x length random
ids, source and target `length` tokens, no padding), a warm-up step and two measured steps
of train.py's step path (t2.train.step.train_step, fused Adam, Accelerate's precision).
Measured: on a CPU the peak resident set (the kernel's high-water mark) above the resident
set before the model was built; on a GPU torch.cuda.max_memory_allocated. Both against the
model's total (weights, gradients, Adam's moments, activations) for that device's code path.
The target: every case within +-25%.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import torch

from t2.cli import run_main
from t2.recipes import load_config

TOLERANCE = 0.25
# (recipe, vocabulary, tokens per batch, sentence length, precision)
CASES = (
    *(("multi30k", 8000, n, 32, p) for n in (2048, 8192) for p in ("fp32", "bf16")),
    *(("base", 8000, 4096, n, p) for n in (16, 64, 128) for p in ("fp32", "bf16")),
    ("base", 32000, 4096, 32, "bf16"),
    ("v2_rope_rmsnorm", 8000, 8192, 32, "bf16"),
    *(  # the attention variants, each one swap from base
        (f"base_{v}", 8000, 4096, 64, "bf16")
        for v in ("relative_positions", "t5_bias", "multi_query", "qk_norm")
    ),
)
QUICK = (("multi30k", 8000, 2048, 32, "fp32"), ("base", 8000, 4096, 64, "bf16"))
GPU_CASES = (  # the planner's own cases: 37k vocabulary, 25k tokens, the longest pairs
    *(("base", 37000, 25000, n, "bf16") for n in (64, 256)),
    ("v2_rope_rmsnorm", 37000, 25000, 256, "bf16"),
    ("big", 37000, 12500, 256, "bf16"),
)


def resident() -> int:
    """This process's resident set now, in bytes."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize()


def measure(recipe: str, vocab: int, tokens: int, length: int, precision: str) -> dict:
    """One case, in this process: measured peak and the model's estimate, in bytes."""
    from benchmarks.train_loops import T2Engine
    from benchmarks.train_scaling import synthetic
    from t2.model.summary import count_parameters, estimate_memory

    cuda = torch.cuda.is_available()
    cfg = load_config(recipe, [])
    cfg = replace(cfg, model=replace(cfg.model, vocab_size=vocab))
    args = argparse.Namespace()
    before = torch.cuda.memory_allocated() if cuda else resident()
    engine = T2Engine(cfg, None, args, precision, synthetic(tokens, length, vocab))
    for _ in range(3):
        engine.step()
    if cuda:
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - before
    else:  # ru_maxrss: the process's high-water mark, in KiB on Linux
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    n_params = count_parameters(engine.acc.unwrap_model(engine.model))["total"]
    rows = max(tokens // length, 1) * length  # the tokens the batches really hold
    est = estimate_memory(
        cfg.model, n_params, rows, length, precision == "bf16", "cuda" if cuda else "cpu"
    )
    return {
        "recipe": recipe,
        "vocab": vocab,
        "tokens": tokens,
        "length": length,
        "precision": precision,
        "device": "cuda" if cuda else "cpu",
        "measured": peak,
        "estimate": est.total,
        "activations": est.activations,
        "ratio": est.total / peak,
    }


def main(argv: list[str] | None = None) -> None:
    run(argv)


def run(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", type=Path, help="write the cases' figures to this file")
    parser.add_argument("--quick", action="store_true", help="two cases only")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # one case, in a child process
    args = parser.parse_args(argv)
    if args.case:
        recipe, vocab, tokens, length, precision = args.case.split(",")
        print(json.dumps(measure(recipe, int(vocab), int(tokens), int(length), precision)))
        return []
    rows = []
    print(
        f"{'recipe':16} {'vocab':>6} {'tokens':>6} {'length':>6} {'prec':5} "
        f"{'measured MiB':>12} {'model MiB':>10} {'model/measured':>14}"
    )
    cases = QUICK if args.quick else CASES + (GPU_CASES if torch.cuda.is_available() else ())
    for case in cases:
        spec = ",".join(map(str, case))
        cmd = [sys.executable, "-m", "benchmarks.bench_memory", "--case", spec]
        out = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if out.returncode:
            raise SystemExit(f"case {spec} failed: {out.stderr.strip().splitlines()[-1:]}")
        row = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(
            f"{row['recipe']:16} {row['vocab']:6} {row['tokens']:6} {row['length']:6} "
            f"{row['precision']:5} {row['measured'] / 2**20:12.0f} "
            f"{row['estimate'] / 2**20:10.0f} {row['ratio']:14.2f}",
            flush=True,
        )
    worst = max(abs(r["ratio"] - 1) for r in rows)
    verdict = "within" if worst <= TOLERANCE else "NOT within"
    print(f"largest error {worst:.0%}: {verdict} the +-{TOLERANCE:.0%} target")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return rows


if __name__ == "__main__":
    run_main(main)
