"""Data pipeline figures on ../shared/data/mixed/train.* (237k de-en pairs); prints figures only.

python benchmarks/bench_data.py [--vocab-size 16000] [--max-tokens 4096] [--batch-size 64]
Measures tokenizer training, encoding against the tokenizer's own encode_batch, batching
and padding waste of token-budget buckets against fixed-size batches of random pairs.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import datasets
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # t2 from a checkout, uninstalled

from t2.cli import run_main
from t2.config import DataConfig
from t2.data import BatchSampler, encode_pairs, load_pairs, make_loader, train_tokenizer
from t2.data.tokenizer import both_sides
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


def padding_waste(sampler: BatchSampler, src: np.ndarray, tgt: np.ndarray) -> tuple[float, float]:
    """Share of pad tokens in the padded src and tgt tensors of one epoch; mean sentences/batch."""
    padded = real = 0
    batches = list(sampler)
    for batch in batches:
        s, t = src[batch], tgt[batch]
        padded += len(batch) * (s.max() + t.max())
        real += s.sum() + t.sum()
    return 1 - real / padded, len(src) / len(batches)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--vocab-size", type=int, default=16000)
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2, help="encoding runs; the best counts")
    args = parser.parse_args()
    datasets.disable_progress_bars()
    prefix = SHARED / "mixed" / "train"
    if not Path(f"{prefix}.de").is_file():
        raise DataError(f"{prefix}.de not found; set T2_SHARED_DATA to the shared data folder")
    with tempfile.TemporaryDirectory() as cache:
        cfg = DataConfig(train=f"files:{prefix}", vocab_size=args.vocab_size, cache_dir=cache)
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
    n = len(src)
    buckets = timed(
        f"BatchSampler build + epoch (max_tokens {args.max_tokens})",
        lambda: (lambda s: (s, list(s)))(BatchSampler(src, tgt, args.max_tokens, 0, 1, True)),
        n,
    )[0]
    fixed = BatchSampler(src, tgt, 0, args.batch_size, 1, True)
    waste, per_batch = padding_waste(buckets, src, tgt)
    print(f"padding waste, token buckets ({per_batch:.0f} sentences/batch avg): {waste:.1%}")
    waste, _ = padding_waste(fixed, src, tgt)
    print(f"padding waste, fixed {args.batch_size} random sentences:          {waste:.1%}")
    same = BatchSampler(src, tgt, 0, round(per_batch), 1, True)
    waste, _ = padding_waste(same, src, tgt)
    print(f"padding waste, fixed {round(per_batch)} random sentences:          {waste:.1%}")
    loader = make_loader(enc, BatchSampler(src, tgt, args.max_tokens, 0, 1, True), 0)
    timed("DataLoader epoch (collate, 0 workers)", lambda: sum(1 for _ in loader), n)


if __name__ == "__main__":
    run_main(main)
