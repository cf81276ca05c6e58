"""Export a trained model for serving: t2 export RUN_OR_CHECKPOINT --format ct2 --out DIR
[--quantization int8|int8_float32|float16|bfloat16|...] [--average-last N].

Writes a CTranslate2 model folder (model.bin, config.json, shared_vocabulary.json), the
run's tokenizer beside it and t2_export.json (the run's config and decoding settings, the
checkpoint it came from, the quantization), so that `t2 translate --engine ct2` and
`t2 evaluate --engine ct2` take the folder as --checkpoint. float32 (the default) keeps the
weights exact. Needs the serving extra: pip install -e ".[serve]". docs/serving.md."""

from __future__ import annotations

import argparse

from t2.cli import check_out_folder
from t2.serve import QUANTIZATIONS

HELP = "export a trained model to CTranslate2 for serving (int8 / float16 optional)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", help="a run directory (its best checkpoint) or a checkpoint")
    parser.add_argument("--format", default="ct2", choices=("ct2",),
                        help="ct2: a CTranslate2 model folder (the only format)")  # fmt: skip
    parser.add_argument("--out", required=True, help="the folder to write")
    parser.add_argument("--quantization", default="float32", choices=QUANTIZATIONS,
                        help="weight type of the export (default float32: exact)")  # fmt: skip
    parser.add_argument(
        "--average-last", type=int, default=0, metavar="N",
        help="export the average of the last N checkpoints (the paper used 5)",
    )  # fmt: skip


def run(args: argparse.Namespace) -> None:
    from t2.serve.ct2 import export_run

    check_out_folder(args.out)
    folder = export_run(args.checkpoint, args.out, args.quantization, args.average_last)
    print(f"exported {args.checkpoint} to {folder} (CTranslate2, {args.quantization})")
