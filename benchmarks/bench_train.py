"""Training speed of the whole loop: t2's training step path against a Hugging Face
MarianMTModel of the same dimensions in its own usual loop, interleaved, on identical
token-budget batches of real text (docs/performance.md).

python -m benchmarks.bench_train [--recipes base,v2_rope_rmsnorm] [--precisions fp32,bf16]
    [--max-tokens 4096] [--rounds 5] [--steps-per-round 2] [--set model.d_model=256 ...]
    [--modes eager,compiled,graphs,flex] [--batches 4] [--sightings 2]
    [--json FILE] [--breakdown] [--scaling] [--profile STEPS] [--count-ops]

t2: what train.py runs between validations: its loader (t2.data.make_loader over a
BatchSampler), Accelerate (mixed precision as train.mixed_precision), t2.train.train_step
(micro-batch, label-smoothed loss, backward, clipping, fused Adam, on-device sums, no host
sync) and the scheduler. The peer: MarianMTModel (post-norm, sinusoidal, ReLU, tied, the
recipe's sizes) fed by a DataLoader over the same batches, logits into
F.cross_entropy(label_smoothing=0.1), backward, clip_grad_norm_, torch.optim.Adam and a
LambdaLR with the same warm-up, bf16 by torch.autocast: the loop of the transformers and
PyTorch tutorials. Both see the same batches in the same order (German-English pairs of
../shared/data/mixed/train, a BPE trained on them).

Timing: every engine cycles the same --batches pre-drawn batches; after a warm-up that
steps through each of them --sightings times (compilation, CUDA graphs' warm-up and
recording: benchmarks/train_modes.py), --rounds rounds of A then B (each round --steps-
per-round steps of one engine), so that a change in the machine's load hits both. t2's
--modes are timed one at a time, each against the peer in rounds of its own, and each
mode's record is written to --json as soon as it is measured. Per engine: the median and
range over rounds of source+target tokens/s and s/step, peak resident memory above the
loaded model (in an untimed round of its own before the timed ones, glibc's free memory
returned to the system first), achieved GFLOP/s from t2.model.flops (the same formula for
both: the same matmuls; both counted from the batch the loader served, on the host, so
neither side waits for the GPU to count); the ratio of medians, t2 over the peer; and the
paired ratios, t2 over the peer within each round (both engines ran the same batches under
the same load), whose range shows how much the machine's noise moves the ratio. A compiled
mode also records its compile seconds, a fallback to eager, its CUDA-graph replays while
timed and its skips (benchmarks/gpu_summary.py flags such rows). Also: a float32 (and
bf16) matmul's GFLOP/s measured in the same run, the machine's practical peak, and MFU on
a GPU of known peak. --breakdown adds report 001's table: forward, backward and optimizer
time per step of t2. --scaling prints, instead of the comparison, how t2's tokens/s and
peak memory grow with the batch's token budget (1k-8k), the sentence length at a fixed
budget (16-128) and the model (quickstart, multi30k, base, big), on random ids without
padding."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from benchmarks.bench_decode import DATA, build_tokenizer
from benchmarks.gpu_summary import compiled_line
from benchmarks.op_count import count_all
from benchmarks.train_loops import (
    MODES,
    Rounds,
    dataset,
    device,
    sync,
)
from benchmarks.train_modes import ModeRun, compare, warm_only
from benchmarks.train_phases import breakdown_all, profile_all
from benchmarks.train_scaling import scaling
from t2.config import Config
from t2.machine import describe
from t2.recipes import load_config

# dense bf16 tensor-core peaks (FLOP/s) for MFU; fp32 peaks are not used (bf16 is the GPU path)
GPU_PEAKS = {"H100": 989e12, "H200": 989e12, "A100": 312e12}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--recipes", default="base,v2_rope_rmsnorm", help="architectures (recipes)")
    p.add_argument("--precisions", default="fp32,bf16", help="fp32 and/or bf16 (autocast)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override a key of every recipe, e.g. model.d_model=256",
    )
    p.add_argument("--max-tokens", type=int, default=4096, help="token budget per batch")
    p.add_argument("--pairs", type=int, default=20000, help="pairs of mixed/train to batch")
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--rounds", type=int, default=5, help="timed rounds (A then B each)")
    p.add_argument(
        "--batches", type=int, default=4, help="pre-drawn batches every engine cycles through"
    )
    p.add_argument(
        "--sightings",
        type=int,
        default=2,
        help="warm-up: each pre-drawn batch this many times before timing (CUDA graphs: "
        "warm-up, then recording; timed steps replay)",
    )
    p.add_argument("--warmup-rounds", type=int, default=1, help="--breakdown's warm-up steps")
    p.add_argument("--steps-per-round", type=int, default=2)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--breakdown", action="store_true", help="report 001's per-phase table")
    p.add_argument(
        "--scaling",
        action="store_true",
        help="instead: t2's tokens/s, memory as batch, length, model grow",
    )
    p.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="STEPS",
        help="print torch.profiler's top operators over STEPS steps",
    )
    p.add_argument(
        "--count-ops",
        action="store_true",
        help="operators per step on CUDA's code path, t2 and the peer (op_count.py)",
    )
    p.add_argument(
        "--modes",
        default="auto",
        help="t2's training pass: auto (the recipe's train.compile: compiled on CUDA), or "
        "any of eager,compiled,graphs,flex, each timed against the peer in turn",
    )
    p.add_argument(
        "--compile-only",
        action="store_true",
        help="only build and warm up each mode (its compilation), untimed, no peer",
    )
    p.add_argument("--json", help="write every figure to this file")
    args = p.parse_args(argv)
    bad_modes = set(args.modes.split(",")) - set(MODES) if args.modes != "auto" else set()
    if bad_modes:
        p.error(f"unknown mode {sorted(bad_modes)[0]!r}; valid: auto or {', '.join(MODES)}")
    bad = set(args.precisions.split(",")) - {"fp32", "bf16"}
    if bad:
        p.error(f"unknown precision {sorted(bad)[0]!r}; valid: fp32, bf16")
    if args.breakdown and args.rounds < 1:
        p.error("--breakdown times --rounds x --steps-per-round steps; give --rounds 1 or more")
    if args.batches < 1 or args.sightings < 1:
        p.error("--batches and --sightings must be at least 1")
    return args


def matmul_peak(precision: str, n: int = 1024, repeats: int = 10, budget_s: float = 2.0) -> float:
    """FLOP/s of an n x n matmul on this device in this run (the practical peak): the best
    of `repeats` timed products, or of those that fit in `budget_s` (at least 2), so that
    a CPU that emulates bf16 (3 s a product) is not timed for half a minute."""
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    a, b = (torch.randn(n, n, device=device(), dtype=dtype) for _ in range(2))
    a @ b  # warm-up
    best, spent = float("inf"), 0.0
    for i in range(repeats):
        sync()
        start = time.perf_counter()
        a @ b
        sync()
        took = time.perf_counter() - start
        best, spent = min(best, took), spent + took
        if i >= 1 and spent > budget_s:
            break
    return 2 * n**3 / best


def engine_row(recipe: str, precision: str, name: str, r: Rounds, peak: float) -> str:
    """One engine's line of the table: speed, share of the matmul peak, memory, and the
    host's CPU time and the GPU's kernel time per step, graphs compiled while timed."""
    gflops = statistics.median(r.flops_per_s) / 1e9
    gpu = "-" if r.gpu_ms_per_step is None else f"{r.gpu_ms_per_step:.1f}"
    return (
        f"{recipe:16} {precision:5} {name:11} {spread(r.tokens_per_s, '.0f'):>24} "
        f"{statistics.median(r.s_per_step):7.3f} {gflops:8.1f} {gflops * 1e9 / peak:6.1%} "
        f"{r.peak_mib:9.0f} {statistics.median(r.host_ms_per_step):8.1f} {gpu:>7} "
        f"{r.recompiles:5}"
    )


def mode_record(
    run: ModeRun, recipe: str, precision: str, cfg: Config, args: argparse.Namespace, peak: float
) -> dict:
    """One mode against the peer: its table rows and lines printed, and its record."""
    for name, rounds in ((run.name, run.t2), ("marian", run.peer)):
        print(engine_row(recipe, precision, name, rounds, peak), flush=True)
    record = {
        "recipe": recipe,
        "precision": precision,
        "device": describe_device(args.threads),
        "d_model": cfg.model.d_model,
        "layers": cfg.model.n_encoder_layers,
        "max_tokens": args.max_tokens,
        "matmul_flops_per_s": peak,
        **versus_peer(run.name, run.t2, run.peer, precision, run.figures),
        **run.figures,
    }
    print(f"{'':16} {precision:5} {run.name}: {compiled_line(record)}", flush=True)
    return record


def versus_peer(name: str, t2: Rounds, peer: Rounds, precision: str, figures: dict) -> dict:
    """A t2 engine against the peer timed in the same rounds: printed, and as a record.
    With CUDA graphs the peak is not compared (replays bypass the allocator and the graphs'
    pool was allocated before the memory round): the reserved memory is (`figures`)."""
    ratio = statistics.median(t2.tokens_per_s) / statistics.median(peer.tokens_per_s)
    paired = [a / b for a, b in zip(t2.tokens_per_s, peer.tokens_per_s, strict=True)]
    graphs = bool(figures.get("t2_cuda_graphs"))
    memory = t2.peak_mib / peer.peak_mib if peer.peak_mib > 0 and not graphs else None
    reserved = figures.get("t2_reserved_mib")
    said = "n/a" if memory is None else f"{memory:.2f}x"
    if graphs:
        said += f" (CUDA graphs; reserved {'n/a' if reserved is None else f'{reserved:.0f} MiB'})"
    print(
        f"{'':16} {precision:5} {name}/marian: {ratio:.2f}x tokens/s (per round: "
        f"{spread(paired, '.2f')}), peak memory {said}; warm-up {t2.warmup_s:.1f} s / "
        f"{peer.warmup_s:.1f} s",
        flush=True,
    )
    peak = gpu_peak()
    host, gpu = statistics.median(t2.host_ms_per_step), t2.gpu_ms_per_step
    return {
        "engine": name,
        "ratio": ratio,
        "ratio_rounds": paired,
        "peak_memory_ratio": memory,
        **{f"t2_{key}": value for key, value in vars(t2).items()},
        **{f"marian_{key}": value for key, value in vars(peer).items()},
        "mfu": None if peak is None else statistics.median(t2.flops_per_s) / peak,
        "host_below_gpu": None if gpu is None else host < gpu,
    }


def describe_device(threads: int) -> str:
    return describe(threads=threads)


def gpu_peak() -> float | None:
    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name()
    return next((v for k, v in GPU_PEAKS.items() if k in name), None)


def spread(values: list[float], fmt: str) -> str:
    low, mid, high = (format(f(values), fmt) for f in (min, statistics.median, max))
    return f"{mid} ({low}-{high})"


def main(argv: list[str] | None = None) -> list[dict]:
    args = parse_args(argv)
    if not (DATA / "mixed" / "train.de").is_file():
        sys.exit(f"error: {DATA / 'mixed'} not found; set T2_SHARED_DATA to the shared data folder")
    torch.set_num_threads(args.threads)
    tokenizer = build_tokenizer(args.vocab)
    ds = dataset(args, tokenizer)
    print(
        f"device: {describe_device(args.threads)}; torch {torch.__version__}; {len(ds)} pairs "
        f"of mixed/train, <= {args.max_tokens} tokens a batch, {args.batches} pre-drawn "
        f"batches cycled; {args.rounds} interleaved rounds of {args.steps_per_round} steps "
        f"after each batch was seen {args.sightings}x"
    )
    records = []
    if args.compile_only:  # gpu.sh's warm-up: the compile cache filled, nothing timed
        return warm_only(args, ds, len(tokenizer), lambda records: save(args, records))
    peaks = {p: matmul_peak(p) for p in args.precisions.split(",")} if args.rounds else {}
    if peaks:  # the share of the peak is a timed round's figure; --rounds 0 counts only
        print("matmul 1024^3: " + ", ".join(f"{p} {v / 1e9:.1f} GFLOP/s" for p, v in peaks.items()))
    print(
        f"{'recipe':16} {'prec':5} {'engine':11} {'tokens/s (range)':>24} {'s/step':>7} "
        f"{'GFLOP/s':>8} {'of mm':>6} {'peak MiB':>9} {'host ms':>8} {'GPU ms':>7} "
        f"{'recmp':>5}"
    )
    compared = args.recipes.split(",") if args.rounds > 0 and not args.scaling else []
    modes = [None] if args.modes == "auto" else args.modes.split(",")
    for recipe in compared:  # --scaling: that table instead; --rounds 0: --profile alone
        cfg = load_config(recipe, args.set)
        cfg = replace(cfg, model=replace(cfg.model, vocab_size=len(tokenizer)))
        for precision in args.precisions.split(","):
            for run in compare(cfg, ds, args, precision, modes):
                record = mode_record(run, recipe, precision, cfg, args, peaks[precision])
                records.append(record)
                save(args, records)  # after each mode: a run cut short keeps what it measured
    if args.count_ops:
        records = count_all(args, ds, len(tokenizer), records)
    if args.scaling:
        for precision in args.precisions.split(","):
            records += scaling(args, len(tokenizer), precision)
    if args.profile:
        profile_all(args, ds, len(tokenizer))
    if args.breakdown:
        records += breakdown_all(args, ds, len(tokenizer))
    save(args, records)
    return records


def save(args: argparse.Namespace, records: list[dict]) -> None:
    """--json: every record so far, written whole under a temporary name, then renamed."""
    if args.json:
        path = Path(args.json)
        partial = path.with_name(path.name + ".partial")
        partial.write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")
        partial.replace(path)


if __name__ == "__main__":
    main()
