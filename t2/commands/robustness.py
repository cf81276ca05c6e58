"""The robustness suite of report 003 for one or several checkpoints side by side:
t2 robustness --checkpoint A [B ...] --src FILE --ref FILE.
Shuffles the middle 50% of source tokens, drops 20%, repeats 20%; prints loss, accuracy and
greedy BLEU under each against the clean control, and writes them (with the accuracy at each
target position) as JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from t2.atomic import atomic_text
from t2.commands.options import add_trust_argument, default_device
from t2.errors import ConfigError, DataError

HELP = "report 003's robustness suite: perturbed sources, checkpoints side by side"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--checkpoint",
        nargs="+",
        required=True,
        help="run directories, checkpoints or hf model folders (t2's model is needed)",
    )
    parser.add_argument("--src", required=True, help="source file, one sentence a line")
    parser.add_argument("--ref", required=True, help="reference file aligned with --src")
    parser.add_argument("--max-sentences", type=int, default=500, help="first N pairs (0: all)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the perturbations")
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per batch")
    parser.add_argument("--out", default="robustness.json", help="JSON file to write")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda if present)")
    add_trust_argument(parser)


def run(args: argparse.Namespace) -> None:
    if args.batch_size < 1 or args.max_sentences < 0:
        raise ConfigError("--batch-size must be at least 1 and --max-sentences at least 0")
    if not Path(args.out).parent.is_dir():  # checked first: the suite takes minutes
        raise DataError(f"output folder of {args.out} not found; create it or pass another")
    from rich.console import Console  # after the checks: a mistake is told before torch loads

    from t2.evaluation.robustness import run_suite, side_by_side, to_json
    from t2.evaluation.scoring import local_testset
    from t2.opener import open_model
    from t2.rundir import RunDir

    device = default_device(args.device)
    data = local_testset(args.src, args.ref)
    limit = args.max_sentences or len(data.sources)
    sources, references = data.sources[:limit], data.references[0][:limit]
    results = {}
    for path in args.checkpoint:
        opened = open_model(path, device=device, trust_plugins=args.trust_plugins)
        if opened.model is None:
            raise ConfigError(
                f"{path} is a {opened.kind} export; the suite needs t2's model: "
                f"pass the run it came from"
            )
        model, cfg, tokenizer, ckpt = opened.model, opened.cfg, opened.tokenizer, opened.path
        name = f"{RunDir.of(ckpt).path.name}/{ckpt.name}" if opened.kind == "run" else ckpt.name
        label = f"{name} ({cfg.model.positional})"
        if label in results:
            label = f"{label} #{len(results) + 1}"
        results[label] = run_suite(
            model, tokenizer, cfg, sources, references, args.seed, args.batch_size, label
        )
    width = None if sys.stdout.isatty() else 60 + 40 * len(results)  # pipes: no folding
    Console(width=width).print(side_by_side(results))
    report = {
        "src": args.src,
        "ref": args.ref,
        "n_sentences": len(sources),
        "seed": args.seed,
        "results": to_json(results),
    }
    with atomic_text(args.out) as f:
        f.write(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
