"""Export a trained model: t2 export TARGET --format hf|ct2 --out DIR [--average-last N]
[--quantization int8|float16|... (ct2)] [--name OWNER/NAME (hf)].

Each format is a registered class (t2/formats, t2.registry.EXPORT) that writes and reads
its folders:
  hf   model.safetensors, config.json (the full t2 config), the tokenizer and README.md, a
       model card generated from the run's files; loads with t2.hub.from_pretrained(DIR)
       and uploads with `t2 push` (docs/hub.md). `t2 save` is this format's alias.
  ct2  a CTranslate2 model folder (model.bin, config.json, shared_vocabulary.json), the
       run's tokenizer and t2_export.json (config, decoding settings, the checkpoint it
       came from, the quantization); float32 (the default) keeps the weights exact. Needs
       the serving extra: pip install -e ".[serve]" (docs/serving.md).
Every exported folder is a TARGET of `t2 translate` and `t2 evaluate` as it is."""

from __future__ import annotations

import argparse

from t2.commands.options import add_trust_argument, check_out_folder
from t2.formats.options import add_export_options, export_options

HELP = "export a trained model as a Hugging Face (hf) or CTranslate2 (ct2) folder"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", help="a run directory (its best checkpoint) or a checkpoint")
    parser.add_argument(
        "--format",
        default="ct2",
        metavar="{hf,ct2}",
        help="a registered export format: hf, a Hugging Face model folder; ct2, CTranslate2 "
        "(default); another name fails listing the registered ones",
    )
    parser.add_argument("--out", required=True, help="the folder to write")
    add_export_options(parser)  # each format's own options (t2.formats.options)
    parser.add_argument(
        "--average-last",
        type=int,
        default=0,
        metavar="N",
        help="export the average of the last N checkpoints (the paper used 5)",
    )
    add_trust_argument(parser)


def run(args: argparse.Namespace) -> None:
    from t2.exporting import export

    check_out_folder(args.out)
    options = export_options(args)
    folder = export(
        args.checkpoint,
        args.format,
        args.out,
        average_last=args.average_last,
        trust_plugins=args.trust_plugins,
        **options,
    )
    print(f"exported {args.checkpoint} to {folder} ({args.format})")
