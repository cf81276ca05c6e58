"""Compare runs side by side: t2 compare RUN_DIR... [--out DIR].

Prints a Markdown table (recipe, seed, the config keys where the runs differ, parameters,
steps, target tokens, wall time, tokens/s, the rule that stopped training, the best
validation loss and BLEU, test BLEU and chrF) and writes DIR/compare.md, DIR/compare.csv
and PNG curves (training and validation loss and validation BLEU against step, target
tokens and wall time; one colour per recipe, seeds of one setting as a mean with a band).
A figure that an older run does not record shows as "-"."""

from __future__ import annotations

import argparse
from pathlib import Path

from t2.commands.options import check_out_folder

HELP = "compare runs: a Markdown/CSV table and overlaid training curves"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directories")
    parser.add_argument("--out", default="compare", help="folder to write (default compare/)")


def run(args: argparse.Namespace) -> None:
    from t2.experiments.reports.compare import compare
    from t2.experiments.sweeps.runs import read_run

    out = check_out_folder(args.out)
    runs = [read_run(path) for path in dict.fromkeys(args.runs)]  # a run named twice: once
    print(compare(runs, out, [str(Path(p)) for p in dict.fromkeys(args.runs)]), end="")
    print(f"wrote {out / 'compare.md'}, {out / 'compare.csv'} and the curves in {out}")
