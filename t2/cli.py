"""The `t2` command (one entry point, a verb per module in t2/commands) and the plumbing the
verbs and the top-level scripts share: one-line errors and a non-zero exit."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from t2 import __version__
from t2.errors import ConfigError, T2Error


def run_main(main: Callable[[], int | None]) -> None:
    """Run an entry point; a T2Error prints as one line on stderr and exits with status 2."""
    try:
        code = main()
    except T2Error as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(err.exit_status)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(code or 0)


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error that points at --help (exit status 2, as argparse)."""

    def error(self, message: str) -> Any:
        print(f"error: {self.prog}: {message}; see {self.prog} --help", file=sys.stderr)
        sys.exit(2)


def _verb(name: str) -> ModuleType:
    return importlib.import_module(f"t2.commands.{name}")


def _describe(parser: argparse.ArgumentParser, module: ModuleType) -> argparse.ArgumentParser:
    parser.description = module.__doc__
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    module.add_arguments(parser)
    parser.set_defaults(run=module.run, verb_parser=parser)
    return parser


def build_parser() -> Parser:
    from t2.commands import VERBS

    parser = Parser(prog="t2", description="Encoder-decoder Transformers for translation, "
                    "assembled from registered components.")  # fmt: skip
    parser.add_argument("--version", action="version", version=f"t2 {__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="COMMAND", required=True,
                                  parser_class=Parser)  # fmt: skip
    for name in VERBS:
        module = _verb(name)
        _describe(verbs.add_parser(name, help=module.HELP), module)
    return parser


def main(argv: list[str] | None = None) -> None:
    """`t2 COMMAND ...`: `t2 --help` lists the commands, `t2 COMMAND --help` their options."""
    args, unknown = build_parser().parse_known_args(argv)
    if unknown:  # reported by the verb, so the line points at `t2 VERB --help`
        args.verb_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    run_main(lambda: args.run(args))


def run_script(verb: str, argv: list[str] | None = None) -> None:
    """A top-level script (train.py, evaluate_model.py, ...) as one verb of `t2`."""
    args = _describe(Parser(), _verb(verb)).parse_args(argv)
    run_main(lambda: args.run(args))


def add_recipe_arguments(parser: argparse.ArgumentParser) -> None:
    """--recipe NAME and repeatable --set section.key=value, shared by the entry scripts."""
    from t2.recipes import recipe_names

    parser.add_argument("--recipe", required=True, help=f"one of: {', '.join(recipe_names())}")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
        help="override a config key, e.g. --set model.norm=rmsnorm (repeatable)",
    )  # fmt: skip


def add_decode_arguments(parser: argparse.ArgumentParser, nbest: bool) -> None:
    """Decoding options, spelled as the decode.* keys they override (--beam: an alias)."""
    parser.add_argument("--beam-size", "--beam", dest="beam_size", type=int, metavar="N",
                        help="decode.beam_size (1: greedy); default: the run's")  # fmt: skip
    parser.add_argument("--lenpen", type=float, help="decode.lenpen, the length penalty alpha")
    parser.add_argument("--length-norm", choices=("gnmt", "length"),
                        help="decode.length_norm: ((5+n)/6)^alpha or n^alpha")  # fmt: skip
    parser.add_argument("--batch-size", type=int, help="decode.batch_size: sentences a batch")
    parser.add_argument(
        "--stopping",
        choices=("heuristic", "exact", "first_k"),
        help="decode.stopping: when a sentence's beam search ends",
    )
    if nbest:
        parser.add_argument("--nbest", type=int, help="decode.nbest: hypotheses per line")
    parser.add_argument(
        "--average-last", type=int, default=0, metavar="N",
        help="average the weights of the last N checkpoints first (the paper used 5)",
    )  # fmt: skip
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda if present)")


def decode_changes(args: argparse.Namespace) -> dict[str, Any]:
    """The decode.* keys that the command line sets."""
    keys = ("beam_size", "lenpen", "length_norm", "batch_size", "nbest", "stopping")
    return {k: getattr(args, k) for k in keys if getattr(args, k, None) is not None}


def default_device(choice: str | None) -> str:
    import torch

    return choice or ("cuda" if torch.cuda.is_available() else "cpu")


def check_out_folder(path: str | Path, option: str = "--out") -> Path:
    """A folder to write into, checked before any work: a file in its place (or among its
    parents) would otherwise fail with a traceback after training or translating."""
    path = Path(path)
    for p in (path, *path.parents):
        if p.exists() and not p.is_dir():
            raise ConfigError(f"{option} {path}: {p} is a file, not a folder; pass another path")
    return path
