"""Train a recipe: python train.py --recipe NAME [--set section.key=value ...] [--dry-run]."""

from __future__ import annotations

import argparse

from t2.cli import run_main
from t2.recipes import load_config, recipe_names


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--recipe", required=True, help=f"one of: {', '.join(recipe_names())}")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
        help="override a config key, e.g. --set model.norm=rmsnorm (repeatable)",
    )  # fmt: skip
    parser.add_argument("--dry-run", action="store_true", help="describe the model and stop")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    cfg = load_config(args.recipe, args.overrides)
    if args.dry_run:
        from t2.describe import describe

        print(describe(cfg, args.recipe))
        return


if __name__ == "__main__":
    run_main(main)
