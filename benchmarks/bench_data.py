"""Data pipeline figures on ../shared/data/mixed/train.* (237k de-en pairs).

python -m benchmarks.bench_data [--vocab-size 16000] [--max-tokens 4096,25000]
    [--max-tokens-per-sentence 64] [--json FILE]
Measures tokenizer training, encoding against the tokenizer's own encode_batch, and for
each token budget one epoch's batches: distinct (rows, source length, target length)
shapes and padding of t2's bucketed batches (data.max_shapes 64, rows a multiple of 8, as
training runs them), of t2's earlier greedy batches (data.max_shapes 0, each padded to its
longest), and of a plain DataLoader over shuffled pairs with per-batch dynamic padding
(the usual loop), at the same mean sentences per batch. --json writes these rows.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import datasets
import numpy as np

from t2.cli import run_main
from t2.config import DataConfig
from t2.data.batching import BatchSampler
from t2.data.loader import make_loader
from t2.data.pipeline import encode_pairs, load_pairs
from t2.data.tokenizer import both_sides, train_tokenizer
from t2.errors import DataError
from t2.progress import Progress

SHARED = Path(
    os.environ.get("T2_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--vocab-size", type=int, default=16000)
    parser.add_argument("--max-tokens", default="4096,25000", help="token budgets, commas")
    parser.add_argument(
        "--max-tokens-per-sentence", type=int, default=DataConfig.max_tokens_per_sentence
    )
    parser.add_argument("--json", type=Path, help="write the batching rows to this file")
    parser.add_argument("--repeats", type=int, default=2, help="encoding runs; the best counts")
    args = parser.parse_args()
    datasets.disable_progress_bars()
    prefix = SHARED / "mixed" / "train"
    if not Path(f"{prefix}.de").is_file():
        raise DataError(f"{prefix}.de not found; set T2_SHARED_DATA to the shared data folder")
    with tempfile.TemporaryDirectory() as cache:
        cfg = DataConfig(
            train=f"files:{prefix}",
            vocab_size=args.vocab_size,
            cache_dir=cache,
            max_tokens_per_sentence=args.max_tokens_per_sentence,
        )
        pairs = timed("read + clean + save (cold)", lambda: load_pairs(cfg, "train", 1))
        n = len(pairs)
        timed("read cleaned pairs (cached)", lambda: load_pairs(cfg, "train", 1), n)
        tok = timed(
            f"tokenizer training (BPE {args.vocab_size}, both sides)",
            lambda: train_tokenizer(
                both_sides(pairs), args.vocab_size, 2, False, Path(cache) / "tok"
            ),
        )
        enc = _encoding(pairs, tok, cfg, args.repeats)
        timed("encode_pairs (cached)", lambda: encode_pairs(pairs, tok, cfg, "train"), n)
        _batching(enc, args)


def _encoding(pairs, tok, cfg: DataConfig, repeats: int):  # noqa: ANN001, ANN202
    """Best of `repeats` alternating runs: direct encode_batch(_fast) against encode_pairs."""
    src, tgt, backend = pairs["src"], pairs["tgt"], tok.backend_tokenizer
    best: dict[str, float] = {}
    progress = Progress(3 * repeats, "encoding runs", "runs")
    for _ in range(repeats):
        runs = {
            "encode_batch, all pairs (direct)": lambda: _direct(backend.encode_batch, src, tgt),
            "encode_batch_fast, all pairs (direct)": lambda: _direct(
                backend.encode_batch_fast, src, tgt
            ),
            "encode_pairs (datasets.map, cold cache)": lambda: encode_pairs(
                pairs, tok, cfg, "train"
            ),
        }
        for label, fn in runs.items():
            pairs.cleanup_cache_files()  # encode_pairs must tokenize again, not read its cache
            start = time.perf_counter()
            enc = fn()
            best[label] = min(best.get(label, float("inf")), time.perf_counter() - start)
            progress.update(1)
    progress.close()
    for label, seconds in best.items():
        print(
            f"{label:<44} {seconds:8.2f} s  ({len(src) / seconds:,.0f} pairs/s, best of {repeats})"
        )
    return enc


def _direct(encode, src: list[str], tgt: list[str]) -> int:  # noqa: ANN001
    ids = [e.ids for e in encode(src, add_special_tokens=False)]
    ids += [e.ids for e in encode(tgt, add_special_tokens=False)]
    return len(ids)


def _batching(enc, args: argparse.Namespace) -> None:  # noqa: ANN001  (encoded pairs)
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


if __name__ == "__main__":
    run_main(main)
