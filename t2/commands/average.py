"""Average the weights of the last N checkpoints (Vaswani et al. 2017 averaged the last 5;
fairseq's average_checkpoints.py): t2 average RUN_OR_CHECKPOINT --last N [--out DIR].

With a run directory, the newest N complete checkpoints; with a checkpoint, the N that end
at it. The average is written beside them (checkpoints/avg-lastN-<newest>/) or, with
--out, to a self-contained folder with the run's tokenizer, which `t2 evaluate` and
`t2 translate` take as --checkpoint."""

from __future__ import annotations

import argparse

from t2.commands.options import add_trust_argument, check_out_folder

HELP = "average the weights of the last N checkpoints into a new checkpoint"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", help="a run directory or a checkpoint")
    parser.add_argument("--last", type=int, default=5, metavar="N", help="how many (default 5)")
    parser.add_argument("--out", help="folder to write (default: beside the checkpoints)")
    add_trust_argument(parser)


def run(args: argparse.Namespace) -> None:
    from t2.rundir import average_checkpoints

    if args.out:
        check_out_folder(args.out)
    folder = average_checkpoints(args.checkpoint, args.last, args.out, args.trust_plugins)
    print(f"averaged the last {args.last} checkpoints of {args.checkpoint}: {folder}")
