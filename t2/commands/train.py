"""Train a recipe: t2 train --recipe NAME [--set section.key=value ...] [--out DIR].

Also runs under `torchrun --nproc-per-node N -m t2 train ...` (or `torchrun ... train.py`)
and `accelerate launch train.py ...`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from t2.commands.options import add_recipe_arguments, check_out_folder

HELP = "train a recipe (CPU, GPU, torchrun, accelerate launch); --resume continues a run"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_recipe_arguments(parser)
    parser.add_argument("--out", type=Path, help="run directory (default: runs/RECIPE)")
    parser.add_argument(
        "--resume",
        nargs="?",
        const="latest",
        metavar="STEP|CHECKPOINT",
        help="continue from the latest checkpoint, or from the one of STEP or at CHECKPOINT "
        "(the later ones are set aside as checkpoints/.abandoned-step-N)",
    )
    parser.add_argument(
        "--wandb",
        choices=["online", "offline", "disabled"],
        default="offline",
        help="W&B logging mode (default offline: no account needed)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the resolved config, its batch plan and memory, and stop",
    )
    parser.add_argument(
        "--device-memory",
        metavar="SIZE",
        help="--dry-run: plan for a GPU of this memory (e.g. 80GiB, 16GB), present or not",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        metavar="N",
        help="--dry-run: plan for N processes (GPUs) in all (default 1)",
    )
    parser.add_argument(
        "--lr-find", action="store_true", help="learning-rate range test (Smith 2015) and stop"
    )


def run(args: argparse.Namespace) -> None:
    from t2.errors import ConfigError
    from t2.recipes import load_config
    from t2.rundir import load_kept

    out = Path(args.out or Path("runs") / Path(args.recipe).stem)
    if args.resume:  # the run's own plugin copies first: its config names their components
        load_kept(out, args.trust_plugins, own=True)
    cfg = load_config(args.recipe, args.overrides, args.trust_plugins)
    if (args.device_memory or args.processes != 1) and not args.dry_run:
        raise ConfigError(
            "--device-memory and --processes plan a --dry-run; a training run "
            "plans for the device and processes it has"
        )
    if args.processes < 1:
        raise ConfigError(f"--processes must be at least 1, got {args.processes}")
    if args.dry_run:
        from t2.describe import describe
        from t2.train.plan import local_device, parse_size

        memory = parse_size(args.device_memory) if args.device_memory else None
        print(describe(cfg, args.recipe, args.processes, local_device(memory)))
        return
    check_out_folder(out)
    if not sys.stderr.isatty():  # in a log file, datasets' progress bars are only noise
        import datasets

        datasets.disable_progress_bars()
    if args.lr_find:
        from t2.train.lr_find import lr_find

        suggestion, plot = lr_find(cfg, out)
        print(f"suggested learning rate: {suggestion:.3g} (plot: {plot})")
        return
    from t2.rundir import RunDir
    from t2.train.run import run_training

    results = run_training(cfg, args.recipe, out, args.resume, args.wandb)
    if results:
        shown = {k: v for k, v in results.items() if "signature" not in k}
        print(json.dumps(shown, indent=2))
        print(f"results: {RunDir(out).results}")
