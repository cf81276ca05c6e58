"""What the command line needs of each format, declared without importing the formats so
that `t2 --help` stays quick: the engine that reads its folders (--engine) and its export
options (`t2 export`'s flags). A format's class reads its own entries (its `engine` and
`options`), and t2.exporting refuses an option the chosen format does not take."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from t2.serve import QUANTIZATIONS

ENGINES = {"run": "t2", "hf": "t2", "ct2": "ct2"}  # format -> the engine that reads it


def engine_names() -> tuple[str, ...]:
    """The choices of --engine."""
    return tuple(sorted(set(ENGINES.values()), reverse=True))  # t2 first


@dataclass(frozen=True)
class ExportOption:
    """One option of `t2 export`, a keyword of its format's writer."""

    name: str
    help: str
    choices: tuple[str, ...] | None = None


EXPORT_OPTIONS: dict[str, tuple[ExportOption, ...]] = {
    "hf": (ExportOption("name", "hf: the repo id the card's example loads (default: --out)"),),
    "ct2": (
        ExportOption(
            "quantization",
            "ct2: weight type of the export (default float32: exact)",
            QUANTIZATIONS,
        ),
    ),
}


def option_names(fmt: str) -> tuple[str, ...]:
    return tuple(option.name for option in EXPORT_OPTIONS[fmt])


def add_export_options(parser: argparse.ArgumentParser) -> None:
    """A flag per format option (--quantization, --name, ...), each saying its format."""
    for options in EXPORT_OPTIONS.values():
        for option in options:
            flag = "--" + option.name.replace("_", "-")
            parser.add_argument(flag, choices=option.choices, help=option.help)


def export_options(args: argparse.Namespace) -> dict[str, object]:
    """The format options of parsed arguments (None: not given)."""
    return {o.name: getattr(args, o.name) for opts in EXPORT_OPTIONS.values() for o in opts}
