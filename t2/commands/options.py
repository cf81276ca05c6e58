"""Command-line options that several verbs share: the recipe, the decode options (generated
from the decode section's fields, t2.decoding.options), the engine's, the device, and a
check of an output folder before any work."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from t2.decoding.options import DecodeConfig
from t2.errors import ConfigError
from t2.formats.options import engine_names
from t2.recipes import recipe_names
from t2.section import add_section_arguments, section_changes
from t2.serve import PRECISIONS


def add_recipe_arguments(parser: argparse.ArgumentParser) -> None:
    """--recipe NAME and repeatable --set section.key=value, shared by the entry scripts."""
    parser.add_argument("--recipe", required=True, help=f"one of: {', '.join(recipe_names())}")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override a config key, e.g. --set model.norm=rmsnorm (repeatable)",
    )
    add_trust_argument(parser)


def add_plugin_arguments(parser: argparse.ArgumentParser) -> None:
    """--plugin, on every verb (t2.cli imports them before it parses: t2.plugins)."""
    parser.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="FILE_OR_MODULE",
        help="import a plugin first: a .py file or a module that registers components "
        "(repeatable; docs/components.md). A run keeps a copy of each, which its later "
        "commands find without this flag",
    )


def add_trust_argument(parser: argparse.ArgumentParser) -> None:
    """--trust-plugins, on the verbs that read recipes, or open exported folders and hub
    repos (t2.rundir.plugins, t2.plugins.load_listed)."""
    parser.add_argument(
        "--trust-plugins",
        action="store_true",
        help="run plugin code you did not give with --plugin: a recipe's or sweep file's "
        "plugins:, or what an hf folder, a CTranslate2 export or a hub repo carries (read "
        "it first); a run directory's own copies need no flag, unless it was downloaded",
    )


def add_decode_arguments(parser: argparse.ArgumentParser, nbest: bool) -> None:
    """A flag per decode.* key (--beam-size, --lenpen, --search, --temperature, ...), then
    --average-last and --device; `nbest`: whether the verb writes n-best lists."""
    group = parser.add_argument_group("decoding (each overrides the run's decode.* key)")
    add_section_arguments(group, DecodeConfig, skip=() if nbest else ("nbest",))
    parser.add_argument(
        "--average-last",
        type=int,
        default=0,
        metavar="N",
        help="average the weights of the last N checkpoints first (the paper used 5)",
    )
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda if present)")


def decode_changes(args: argparse.Namespace) -> dict[str, Any]:
    """The decode.* keys that the command line sets."""
    return section_changes(args, DecodeConfig)


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    """--precision, --workers and the optional --engine, shared by evaluate and translate."""
    parser.add_argument(
        "--engine",
        choices=engine_names(),
        help="optional: the folder says which engine translates (t2 for runs and hf "
        "folders, CTranslate2 for ct2 exports); given, it is checked against the folder",
    )
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        help="compute type of decoding (default: as stored: float32 for t2, the export's type "
        "for ct2). bfloat16 is faster on GPUs and on CPUs with AVX-512 BF16 or AMX and may "
        "change a few outputs (docs/serving.md); float16 is for GPUs",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="ct2 exports only: decode N batches at once, each by one CTranslate2 worker with "
        "its share of the threads (its inter_threads; default 1). On a CPU, one worker per "
        "core decodes faster than one worker with every core (docs/serving.md)",
    )


def default_device(choice: str | None) -> str:
    import torch  # a heavy import: `t2 VERB --help` stays quick

    return choice or ("cuda" if torch.cuda.is_available() else "cpu")


def check_out_folder(path: str | Path, option: str = "--out") -> Path:
    """A folder to write into, checked before any work: a file in its place (or among its
    parents) would otherwise fail with a traceback after training or translating."""
    path = Path(path)
    for p in (path, *path.parents):
        if p.exists() and not p.is_dir():
            raise ConfigError(f"{option} {path}: {p} is a file, not a folder; pass another path")
    return path
