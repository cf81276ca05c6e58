"""Save a run's checkpoint as a Hugging Face model folder, offline (the alias of
`t2 export --format hf`): t2 save RUN_OR_CHECKPOINT --out DIR [--name OWNER/NAME].

Writes model.safetensors, config.json (the full t2 config, format and version), the
tokenizer files and README.md, a model card generated from the run's own files
(architecture, recipe, data, steps and tokens, validation and test scores with their
sacreBLEU signatures and decoding settings). The folder loads with
t2.hub.from_pretrained(DIR) and works as `t2 evaluate` / `t2 translate --checkpoint DIR`;
`t2 push` uploads the same folder. Details: docs/hub.md."""

from __future__ import annotations

import argparse

from t2.commands.options import check_out_folder

HELP = "save a run's checkpoint as a model folder with its model card (no upload)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", help="a run directory (its best checkpoint) or a checkpoint")
    parser.add_argument("--out", required=True, help="the folder to write (replaced if saved)")
    parser.add_argument("--name", help="repo id the model card's example loads (default: --out)")


def run(args: argparse.Namespace) -> None:
    from t2.exporting import save_run

    check_out_folder(args.out)
    folder = save_run(args.checkpoint, args.out, args.name)
    print(f"saved {args.checkpoint} as {folder} (model card: {folder / 'README.md'})")
