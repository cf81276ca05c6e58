"""Upload a run's checkpoint to the Hugging Face Hub with a generated model card:
t2 push RUN_OR_CHECKPOINT_OR_SAVED_DIR OWNER/NAME [--private] [--message TEXT] [--out DIR].

The checkpoint (a run directory's best) is saved as `t2 save` does, into a temporary
folder or --out, then uploaded with huggingface_hub (HfApi.create_repo, upload_folder); a
folder written by `t2 save` is uploaded as it is. Needs a token with write access
(`hf auth login` or HF_TOKEN). Details: docs/hub.md."""

from __future__ import annotations

import argparse

from t2.commands.options import add_trust_argument, check_out_folder

HELP = "upload a run's checkpoint to the Hugging Face Hub with a generated model card"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", help="a run directory, a checkpoint or a t2 save folder")
    parser.add_argument("repo_id", metavar="OWNER/NAME", help="the hub repo (created if new)")
    parser.add_argument("--private", action="store_true", help="create the repo as private")
    parser.add_argument("--message", help="commit message (default: t2 VERSION: NAME)")
    parser.add_argument("--out", help="keep the saved folder here (default: a temporary one)")
    add_trust_argument(parser)


def run(args: argparse.Namespace) -> None:
    from t2.exporting import push

    if args.out:
        check_out_folder(args.out)
    url = push(
        args.checkpoint,
        args.repo_id,
        private=args.private,
        message=args.message,
        out=args.out,
        trust_plugins=args.trust_plugins,
    )
    print(f"pushed {args.checkpoint} to {args.repo_id}: {url}")
