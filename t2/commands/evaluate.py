"""Score a model with sacreBLEU's BLEU and chrF:
t2 evaluate --checkpoint TARGET [--src FILE --ref FILE | --testset NAME [NAME ...] --langpair xx-yy]
[--beam-size N] [--lenpen A] [--average-last N]. TARGET is a run, a checkpoint, an exported
folder (hf or ct2) or a hub repo id. Without --src/--ref or --testset, the run's own test
split is translated."""

from __future__ import annotations

import argparse

from t2.commands.options import (
    add_decode_arguments,
    add_engine_arguments,
    add_trust_argument,
    check_out_folder,
    decode_changes,
    default_device,
)

HELP = "translate a test set and score it with sacreBLEU (BLEU, chrF, signatures)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--checkpoint",
        required=True,
        metavar="TARGET",
        help="a run directory (its best checkpoint), a checkpoint, an exported folder (hf or "
        "ct2) or a Hugging Face Hub repo id (owner/name)",
    )
    parser.add_argument("--src", help="source file, one sentence a line")
    parser.add_argument("--ref", help="reference file aligned with --src")
    parser.add_argument(
        "--testset",
        nargs="+",
        default=[],
        metavar="NAME",
        help="sacreBLEU test sets by name, e.g. wmt13 wmt14 (needs their cache); one model, "
        "each set scored and written apart",
    )
    parser.add_argument("--langpair", help="language pair of --testset, e.g. de-en")
    add_decode_arguments(parser, nbest=False)
    add_engine_arguments(parser)
    add_trust_argument(parser)
    parser.add_argument("--out", help="folder for hyps.txt and scores.json (default: beside it)")
    parser.add_argument("--show", type=int, default=10, help="rows of the sample table")


def run(args: argparse.Namespace) -> None:
    from t2.evaluation.evaluate import EvalOptions, evaluate

    if args.out:
        check_out_folder(args.out)
    device = default_device(args.device)
    opts = EvalOptions(
        checkpoint=args.checkpoint,
        src=args.src,
        ref=args.ref,
        testsets=tuple(args.testset),
        langpair=args.langpair,
        decode=decode_changes(args),
        average_last=args.average_last,
        out=args.out,
        show=args.show,
        device=device,
        engine=args.engine,
        precision=args.precision,
        workers=args.workers,
        trust_plugins=args.trust_plugins,
    )
    evaluate(opts)
