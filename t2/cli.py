"""Shared plumbing of the entry scripts: one-line errors and a non-zero exit."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from t2.errors import ConfigError, T2Error


def run_main(main: Callable[[], int | None]) -> None:
    """Run an entry point; a T2Error prints as one line on stderr and exits with status 2."""
    try:
        code = main()
    except T2Error as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(code or 0)


def add_recipe_arguments(parser: argparse.ArgumentParser) -> None:
    """--recipe NAME and repeatable --set section.key=value, shared by the entry scripts."""
    from t2.recipes import recipe_names

    parser.add_argument("--recipe", required=True, help=f"one of: {', '.join(recipe_names())}")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
        help="override a config key, e.g. --set model.norm=rmsnorm (repeatable)",
    )  # fmt: skip


def check_out_folder(path: str | Path, option: str = "--out") -> Path:
    """A folder to write into, checked before any work: a file in its place (or among its
    parents) would otherwise fail with a traceback after training or translating."""
    path = Path(path)
    for p in (path, *path.parents):
        if p.exists() and not p.is_dir():
            raise ConfigError(f"{option} {path}: {p} is a file, not a folder; pass another path")
    return path
