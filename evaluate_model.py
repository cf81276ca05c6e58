"""Score a checkpoint with sacreBLEU's BLEU and chrF:
python evaluate_model.py --checkpoint RUN_OR_CHECKPOINT [--src FILE --ref FILE | --testset NAME
--langpair xx-yy] [--beam N] [--lenpen A] [--average-last N].
Without --src/--ref or --testset, the run's own test split is translated."""

from __future__ import annotations

import argparse

from t2.cli import check_out_folder, run_main


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--checkpoint", required=True, help="a run directory or a checkpoint")
    parser.add_argument("--src", help="source file, one sentence a line")
    parser.add_argument("--ref", help="reference file aligned with --src")
    parser.add_argument("--testset", help="a sacreBLEU test set, e.g. wmt14 (needs its cache)")
    parser.add_argument("--langpair", help="language pair of --testset, e.g. de-en")
    parser.add_argument("--beam", type=int, help="beam size (1: greedy); default: the run's")
    parser.add_argument(
        "--lenpen", type=float, help="GNMT length penalty alpha; default: the run's"
    )
    parser.add_argument("--batch-size", type=int, help="sentences per decoding batch")
    parser.add_argument(
        "--average-last", type=int, default=0, metavar="N",
        help="average the weights of the last N checkpoints first (the paper used 5)",
    )  # fmt: skip
    parser.add_argument("--out", help="folder for hyps.txt and scores.json (default: beside it)")
    parser.add_argument("--show", type=int, default=10, help="rows of the sample table")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda if present)")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    import torch

    from t2.evaluation.evaluate import EvalOptions, evaluate

    if args.out:
        check_out_folder(args.out)

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    opts = EvalOptions(
        checkpoint=args.checkpoint, src=args.src, ref=args.ref, testset=args.testset,
        langpair=args.langpair, beam=args.beam, lenpen=args.lenpen, batch_size=args.batch_size,
        average_last=args.average_last, out=args.out, show=args.show, device=device,
    )  # fmt: skip
    evaluate(opts)


if __name__ == "__main__":
    run_main(main)
