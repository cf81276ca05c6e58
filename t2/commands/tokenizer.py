"""Train a recipe's joint BPE once: t2 tokenizer --recipe NAME --out DIR.

It learns from both sides of the recipe's cleaned train split (a sample of
data.tokenizer_sample pairs), as a training run does and through the same data cache;
later runs reuse the folder with --set data.tokenizer=DIR. An existing tokenizer in DIR is
kept unless --force is given.
"""

from __future__ import annotations

import argparse
import json
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
    from t2.data.tokenizer import SAMPLE, cached_tokenizer, copy_folder, load_tokenizer
    from t2.recipes import load_config

    cfg = load_config(args.recipe, args.overrides, args.trust_plugins)
    check_out_folder(args.out)
    if (args.out / "tokenizer.json").is_file() and not args.force:
        tok = load_tokenizer(args.out)
        print(
            f"tokenizer: {args.out} exists ({len(tok)} entries); reusing it (--force replaces it)"
        )
        return
    pairs = load_pairs(cfg.data, "train", cfg.train.seed)
    start = time.perf_counter()
    cache, tok = cached_tokenizer(cfg.data, pairs)
    copy_folder(cache, args.out)
    seconds = time.perf_counter() - start
    learnt = json.loads((cache / SAMPLE).read_text(encoding="utf-8"))["sample_pairs"]
    sample = "" if learnt == len(pairs) else f" (a sample of the {len(pairs)})"
    print(
        f"tokenizer: {len(tok)} entries from {learnt} pairs{sample} in {seconds:.1f}s -> {args.out}"
    )
    example = pairs[0]["src"]
    print(f"example: {example!r} -> {tok.tokenize(example)}")
    print(f"reuse it with: --set data.tokenizer={args.out}")
