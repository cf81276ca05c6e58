"""Train a recipe's joint BPE once: t2 tokenizer --recipe NAME --out DIR.

It reads both sides of the recipe's cleaned train split; later runs reuse the folder with
--set data.tokenizer=DIR. An existing tokenizer in DIR is kept unless --force is given.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from t2.commands.options import add_recipe_arguments, check_out_folder

HELP = "train a recipe's joint BPE tokenizer once, to reuse with data.tokenizer"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_recipe_arguments(parser)
    parser.add_argument("--out", type=Path, required=True, help="folder to save the tokenizer in")
    parser.add_argument("--force", action="store_true", help="retrain even if --out holds one")


def run(args: argparse.Namespace) -> None:
    from t2.data.pipeline import load_pairs
    from t2.data.tokenizer import both_sides, load_tokenizer, train_tokenizer
    from t2.recipes import load_config

    cfg = load_config(args.recipe, args.overrides)
    check_out_folder(args.out)
    if (args.out / "tokenizer.json").is_file() and not args.force:
        tok = load_tokenizer(args.out)
        print(f"tokenizer: {args.out} exists ({len(tok)} entries); reusing it (--force retrains)")
        return
    pairs = load_pairs(cfg.data, "train", cfg.train.seed)
    start = time.perf_counter()
    data = cfg.data
    tok = train_tokenizer(
        both_sides(pairs),
        data.vocab_size,
        data.min_frequency,
        data.split_digits,
        args.out,
        total=2 * len(pairs),
    )
    seconds = time.perf_counter() - start
    print(f"tokenizer: {len(tok)} entries from {len(pairs)} pairs in {seconds:.1f}s -> {args.out}")
    sample = pairs[0]["src"]
    print(f"example: {sample!r} -> {tok.tokenize(sample)}")
    print(f"reuse it with: --set data.tokenizer={args.out}")
