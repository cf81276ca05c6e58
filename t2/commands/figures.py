"""Draw a run's figures as PNG files: t2 figures RUN_DIR [--sentence TEXT] [--out DIR].

Writes positional_encoding.png (the sinusoidal table for the run's d_model, report 000's
figure 1.1), attention_encoder_self.png, attention_decoder_self.png and attention_cross.png
(every layer and head, for one sentence translated greedily by the run's best checkpoint),
lr_find.png when the run has a learning-rate range test, and the training curves. Without
--sentence, the first source sentence of the run's validation split is used."""

from __future__ import annotations

import argparse

from t2.commands.options import add_trust_argument, check_out_folder, default_device

HELP = "draw a run's figures: positional encoding, attention maps, LR finder, curves"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run directory of t2 train")
    parser.add_argument(
        "--sentence",
        help="source text to draw attention for (default: the "
        "first source sentence of the run's validation split)",
    )
    parser.add_argument("--out", help="folder to write into (default: RUN_DIR/figures)")
    parser.add_argument(
        "--checkpoint",
        metavar="best|latest|PATH",
        help="which weights: the best (default), the latest, or a checkpoint folder",
    )
    parser.add_argument(
        "--positions",
        type=int,
        metavar="N",
        help="positions in the positional-encoding figure (default 100)",
    )
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda if present)")
    add_trust_argument(parser)


def run(args: argparse.Namespace) -> None:
    from t2.figures import FigureOptions, write_figures

    if args.out:
        check_out_folder(args.out)
    given = {k: getattr(args, k) for k in ("sentence", "out", "checkpoint", "positions")}
    opts = FigureOptions(
        args.run_dir,
        device=default_device(args.device),
        trust_plugins=args.trust_plugins,
        **{k: v for k, v in given.items() if v is not None},
    )
    for path in write_figures(opts):
        print(path)
