"""Data at scale: each stage of t2's data pipeline from raw files to the first training
step, beside the limits for the same texts on the same cores.

python -m benchmarks.bench_data [--pairs 4500000] [--recipe base] [--set KEY=VALUE ...]
    [--vocab-size 37000] [--tokenizer-sample N] [--repeats 1] [--work DIR] [--fast-limit]
    [--no-limits] [--batching --max-tokens 4096,25000] [--json FILE]
--pairs N builds a corpus of N pairs from ../shared/data/mixed (benchmarks/corpus.py; 0: the
mixed corpus as it is, 237k pairs). Each repeat runs, each in a process of its own (its
own peak memory): t2 cold (an empty data cache: read and clean, the tokenizer's sample and
merges, encoding, planning the batches, one training micro-batch), t2 warm (the same from
the cache), `tokenizers`' encode_batch of every text (--fast-limit: encode_batch_fast
too), and its trainer on the same sample; the ratios compare t2's stage with the limit of
the same repeat. --batching adds the
shapes and padding of one epoch per token budget: t2's bucketed batches (data.max_shapes
64, rows a multiple of 8), its greedy batches (data.max_shapes 0) and a plain DataLoader
over shuffled pairs with per-batch dynamic padding, at the same mean sentences per batch
(--json writes these rows).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.corpus import build, mixed_prefix
from t2.cli import run_main
from t2.config import DataConfig
from t2.data.batching import BatchSampler
from t2.data.cache import open_stream
from t2.data.loader import make_loader
from t2.machine import cpu_name

ROOT = Path(__file__).resolve().parent.parent


def timed(label: str, fn, count: int | None = None, unit: str = "pairs"):  # noqa: ANN001, ANN201
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    rate = f"  ({count / seconds:,.0f} {unit}/s)" if count else ""
    print(f"{label:<44} {seconds:8.2f} s{rate}", flush=True)
    return result


def epoch_figures(batches: list, src: np.ndarray, tgt: np.ndarray) -> dict:
    """Distinct shapes and the share of pad tokens in one epoch's padded src and tgt
    tensors; a batch is padded to its `lengths` if it has them, else to its longest."""
    padded = real = 0
    shapes = set()
    for batch in batches:
        s, t = src[batch], tgt[batch]
        lengths = getattr(batch, "lengths", None) or (int(s.max()), int(t.max()))
        shapes.add((len(batch), *lengths))
        padded += len(batch) * sum(lengths)
        real += s.sum() + t.sum()
    return {
        "distinct_shapes": len(shapes),
        "padding": float(1 - real / padded),
        "batches": len(batches),
        "sentences_per_batch": len(src) / len(batches),
    }


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=0, help="0: the mixed corpus as it is")
    parser.add_argument("--recipe", default="base")
    parser.add_argument("--set", action="append", default=[], help="recipe overrides, KEY=VALUE")
    parser.add_argument("--vocab-size", type=int, default=37000)
    parser.add_argument("--tokenizer-sample", type=int, default=DataConfig.tokenizer_sample)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--work", type=Path, default=Path("/tmp/t2-bench-data"))
    parser.add_argument("--batching", action="store_true", help="shapes and padding too")
    parser.add_argument(
        "--fast-limit", action="store_true", help="time encode_batch_fast too (t2's call)"
    )
    parser.add_argument(
        "--limits",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the raw encoder's and trainer's limits (--no-limits: t2's stages alone)",
    )
    parser.add_argument("--max-tokens", default="4096,25000", help="token budgets, commas")
    parser.add_argument(
        "--max-tokens-per-sentence", type=int, help="data.max_tokens_per_sentence (the recipe's)"
    )
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    return parser.parse_args()


def child(kind: str, args: dict) -> dict:
    """One measurement in a process of its own: its figures (benchmarks.data_scale)."""
    cmd = [sys.executable, "-m", "benchmarks.data_scale", kind, json.dumps(args)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}
    done = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise SystemExit(f"error: the {kind} measurement failed (exit {done.returncode})")
    return json.loads(done.stdout.strip().splitlines()[-1])


def t2_sets(prefix: Path, cache: Path, args: argparse.Namespace) -> list[str]:
    valid, limit = mixed_prefix().parent / "valid", args.max_tokens_per_sentence
    return (
        [
            f"data.train=files:{prefix}",
            f"data.valid=files:{valid}",
            f"data.test=files:{valid}",
            "data.src_lang=de",
            "data.tgt_lang=en",
            f"data.vocab_size={args.vocab_size}",
            f"data.tokenizer_sample={args.tokenizer_sample}",
            f"data.cache_dir={cache}",
            "train.global_batch=0",  # the first step: one micro-batch
            "train.accumulate=1",
        ]
        + ([] if limit is None else [f"data.max_tokens_per_sentence={limit}"])
        + args.set
    )


def repeat(prefix: Path, work: Path, args: argparse.Namespace) -> dict:
    """One round: t2 cold, t2 warm, then the raw limits on the texts t2 cleaned."""
    cache = work / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(work / "runs", ignore_errors=True)
    sets = t2_sets(prefix, cache, args)
    figures = {}
    for name in ("cold", "warm"):
        run = {"recipe": args.recipe, "sets": sets, "run": str(work / "runs" / name)}
        figures[f"t2 {name}"] = child("t2", run)
    cold = figures["t2 cold"]
    if not args.limits:
        return figures
    pairs, tokenizer, facts = cold["pairs_file"], cold["tokenizer"], cold["record"]["tokenizer"]
    encode = {"pairs": pairs, "tokenizer": tokenizer, "fast": args.fast_limit}
    figures["encode"] = child("encode", encode)
    figures["train"] = child(
        "train",
        {
            "pairs": pairs,
            "tokenizer": tokenizer,
            "pairs_count": facts["pairs"],
            "sample": args.tokenizer_sample,
            "vocab_size": args.vocab_size,
            "min_frequency": DataConfig.min_frequency,
            "split_digits": DataConfig.split_digits,
        },
    )
    return figures


def spread(values: list[float]) -> str:
    """The best of the repeats, and the worst when there are several."""
    return f"{min(values):.1f}" + (f" (to {max(values):.1f})" if len(values) > 1 else "")


def report(rounds: list[dict]) -> None:
    """Each stage's seconds and peak memory, from raw files and from the cache, then t2's
    stages against the limits."""
    runs = {"cold": [r["t2 cold"] for r in rounds], "warm": [r["t2 warm"] for r in rounds]}
    names = list(dict.fromkeys(n for r in rounds for k in runs for n in r[f"t2 {k}"]["stages"]))
    print(f"\n{'t2 stage':<40} {'raw files: s':>16} {'peak MB':>8} {'cache: s':>14} {'peak MB':>8}")

    def line(label: str, pick) -> None:  # noqa: ANN001
        cells = []
        for kind in ("cold", "warm"):
            found = [pick(run) for run in runs[kind] if pick(run) is not None]
            seconds = spread([f[0] for f in found]) if found else "-"
            peak = f"{max(f[1] for f in found):.0f}" if found and found[0][1] else ""
            cells += [f"{seconds:>16}" if kind == "cold" else f"{seconds:>14}", f"{peak:>8}"]
        print(f"{label:<40} {' '.join(cells)}")

    for name in names:
        line(
            name,
            lambda r, n=name: (
                (r["stages"][n]["s"], r["stages"][n]["peak_mb"]) if n in r["stages"] else None
            ),
        )
    line(
        "imports, model, optimizer and the rest",
        lambda r: (r["ready_s"] - sum(v["s"] for v in r["stages"].values()), None),
    )
    line("ready to train: the first batch in hand", lambda r: (r["ready_s"], r["peak_mb_ready"]))
    line("one training micro-batch", lambda r: (r["first_step_s"], r["peak_mb"]))
    cold = runs["cold"]
    if "encode" not in rounds[0]:  # --no-limits
        return

    def seconds(c: dict, key: str, *names: str) -> float:
        return sum(c["stages"][n][key] for n in names)

    print(
        f"\n{'t2 against the limit, same texts and cores':<40} {'t2 s':>8} {'limit s':>8} "
        f"{'ratio':>14} {'t2 CPU s':>9} {'limit CPU s':>11} {'ratio':>14}"
    )
    merges = ("tokenizer: reading", "tokenizer: computing the merges")
    limits = [("BPE trainer on the same sample", merges, "train", "train")]
    limits += [
        (f"{name} of every text", ("data train: encode",), "encode", name)
        for name in ("encode_batch", "encode_batch_fast")
        if name in rounds[0]["encode"]
    ]
    for label, names, kind, key in limits:
        cells = []
        for suffix, stage_key in (("", "s"), ("_cpu", "cpu_s")):
            ours = [seconds(c, stage_key, *names) for c in cold]
            limit = [r[kind][key + suffix] for r in rounds]
            ratios = [a / b for a, b in zip(ours, limit, strict=True)]
            cells.append(f"{min(ours):8.1f} {min(limit):8.1f} {spread(ratios) + 'x':>14}")
        print(f"{label:<40} {' '.join(cells)}")
    same = all(r["train"]["same"] for r in rounds)
    print(f"t2's BPE has the raw trainer's vocabulary and merges: {same}")


def main() -> None:
    args = parse_args()
    work = args.work
    prefix = mixed_prefix()
    if args.pairs:
        prefix = build(work / f"corpus-{args.pairs}" / "train", args.pairs)
    print(
        f"{cpu_name()}, {os.cpu_count()} cores; {time.strftime('%Y-%m-%d %H:%M')}; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    sizes = [Path(f"{prefix}.{lang}").stat().st_size / 1e6 for lang in ("de", "en")]
    print(f"corpus {prefix}.{{de,en}}: {sizes[0]:.0f} MB + {sizes[1]:.0f} MB")
    rounds = [repeat(prefix, work, args) for _ in range(args.repeats)]
    report(rounds)
    rows = []
    if args.batching:
        if args.max_tokens_per_sentence is None:  # what the rows say the pairs were cut at
            from t2.recipes import load_config

            limit = load_config(args.recipe).data.max_tokens_per_sentence
            args = argparse.Namespace(**{**vars(args), "max_tokens_per_sentence": limit})
        ids = Path(rounds[-1]["t2 cold"]["ids_file"])
        rows = _batching(open_stream(ids), argparse.Namespace(**{**vars(args), "json": None}))
    if args.json:
        args.json.write_text(json.dumps({"rounds": rounds, "batching": rows}, indent=1))


def _batching(enc, args: argparse.Namespace) -> list[dict]:  # noqa: ANN001  (encoded pairs)
    lengths = enc.with_format("numpy", columns=["src_len", "tgt_len"])[:]
    src, tgt = lengths["src_len"], lengths["tgt_len"]
    n, rows = len(src), []
    bucketed = DataConfig()  # the defaults training runs with
    for budget in (int(b) for b in args.max_tokens.split(",")):
        t2 = timed(
            f"BatchSampler build + epoch (max_tokens {budget})",
            lambda b=budget: list(
                BatchSampler(
                    src,
                    tgt,
                    b,
                    0,
                    1,
                    True,
                    max_shapes=bucketed.max_shapes,
                    rows_multiple=bucketed.pad_multiple,
                    length_multiple=bucketed.length_multiple,
                )
            ),
            n,
        )
        figures = {"t2 buckets": epoch_figures(t2, src, tgt)}
        greedy = list(BatchSampler(src, tgt, budget, 0, 1, True))
        figures["t2 greedy (max_shapes 0)"] = epoch_figures(greedy, src, tgt)
        per_batch = round(figures["t2 buckets"]["sentences_per_batch"])
        plain = list(BatchSampler(src, tgt, 0, per_batch, 1, True))  # shuffled, fixed size
        figures[f"DataLoader, {per_batch} shuffled pairs"] = epoch_figures(plain, src, tgt)
        for name, f in figures.items():
            print(
                f"  {budget:>6} tokens  {name:<28} {f['distinct_shapes']:6} shapes  "
                f"padding {f['padding']:6.1%}  {f['sentences_per_batch']:6.0f} pairs/batch"
            )
            rows.append(
                {
                    "max_tokens": budget,
                    "batching": name,
                    "max_tokens_per_sentence": args.max_tokens_per_sentence,
                    **f,
                }
            )
    loader = make_loader(
        enc, BatchSampler(src, tgt, 4096, 0, 1, True, max_shapes=64, rows_multiple=8), 0
    )
    timed("DataLoader epoch (collate, 0 workers)", lambda: sum(1 for _ in loader), n)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return rows


if __name__ == "__main__":
    run_main(main)
