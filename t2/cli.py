"""The `t2` command: a dispatcher to one module per verb (t2/commands), with the plumbing the
verbs and the top-level scripts share: plugins imported before the parser is built (its
choices are the registries' names), one-line errors and a non-zero exit. The options
several verbs share are t2.commands.options'."""

from __future__ import annotations

import argparse
import atexit
import importlib
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

from t2 import __version__
from t2.commands import VERBS
from t2.commands.options import add_plugin_arguments
from t2.errors import T2Error
from t2.plugins import load_plugins


def run_main(main: Callable[[], int | None]) -> None:
    """Run an entry point; a T2Error prints as one line on stderr and exits with status 2."""
    try:
        code = main()
    except T2Error as err:
        if err.shown:
            print(f"error: {err}", file=sys.stderr)
        exit_process(err.exit_status)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        exit_process(130)
    exit_process(code or 0)


def exit_process(code: int) -> NoReturn:
    """Exit with `code`. A process of a multi-process job (torchrun and accelerate launch set
    WORLD_SIZE) exits the way multiprocessing's workers do: its threads joined, atexit
    handlers run and streams flushed, then os._exit, without the interpreter's finalization.
    Why: gloo's worker threads outlive destroy_process_group (DDP's reducer keeps the group
    alive), and one that frees a collective's tensor while CPython finalizes is stopped
    inside a C++ destructor: std::terminate, SIGABRT, and a finished job reported as failed
    (about 1 run in 40 on 2 busy cores; Python 3.14 hangs there instead)."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        sys.exit(code)
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


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
    add_plugin_arguments(parser)
    parser.set_defaults(run=module.run, verb_parser=parser)
    return parser


def load_plugins_first(argv: list[str]) -> None:
    """Import the --plugin files and modules, and the plugins a --checkpoint folder keeps,
    before the parser is built: its choices (--search) are the registries' names. Nothing
    is imported when neither is given, so `t2 --help` loads no torch."""
    early = Parser(prog="t2", add_help=False)
    early.add_argument("--plugin", action="append", default=[])
    early.add_argument("--trust-plugins", action="store_true")
    early.add_argument("--checkpoint", nargs="+", default=[])
    known, _ = early.parse_known_args(argv)
    load_plugins(known.plugin)
    folders = [Path(path) for path in known.checkpoint if os.path.isdir(path)]
    if folders:
        from t2.errors import CheckpointError
        from t2.formats.choose import format_of, import_kept

        for folder in folders:  # trust as the opener decides it: from the folder's format
            try:
                fmt = format_of(folder)
            except CheckpointError:
                continue  # no model folder, or several: the verb's opener says so
            import_kept(folder, fmt, known.trust_plugins)


def build_parser() -> Parser:
    parser = Parser(
        prog="t2",
        description="Encoder-decoder Transformers for translation, "
        "assembled from registered components.",
    )
    parser.add_argument("--version", action="version", version=f"t2 {__version__}")
    verbs = parser.add_subparsers(
        dest="verb", metavar="COMMAND", required=True, parser_class=Parser
    )
    for name in VERBS:
        module = _verb(name)
        _describe(verbs.add_parser(name, help=module.HELP), module)
    return parser


def main(argv: list[str] | None = None) -> None:
    """`t2 COMMAND ...`: `t2 --help` lists the commands, `t2 COMMAND --help` their options."""
    argv = sys.argv[1:] if argv is None else list(argv)

    def dispatch() -> int | None:
        load_plugins_first(argv)
        args, unknown = build_parser().parse_known_args(argv)
        if unknown:  # reported by the verb, so the line points at `t2 VERB --help`
            args.verb_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        return args.run(args)

    run_main(dispatch)


def run_script(verb: str, argv: list[str] | None = None) -> None:
    """A top-level script (train.py, evaluate_model.py, ...) as one verb of `t2`."""
    argv = sys.argv[1:] if argv is None else list(argv)

    def dispatch() -> int | None:
        load_plugins_first(argv)
        args = _describe(Parser(), _verb(verb)).parse_args(argv)
        return args.run(args)

    run_main(dispatch)
