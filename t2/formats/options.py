"""What the command line needs of the formats, declared without importing them so that
`t2 --help` stays quick: the engines (--engine) and the export options (`t2 export`'s
flags). A format's class names its own engine and the options it takes, and
t2.exporting refuses an option the chosen format does not take."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from t2.serve import QUANTIZATIONS

ENGINES = ("t2", "ct2")  # t2's own search, CTranslate2's (t2.serve)


def engine_names() -> tuple[str, ...]:
    """The choices of --engine."""
    return ENGINES


@dataclass(frozen=True)
class ExportOption:
    """One option of `t2 export`, a keyword of its format's writer."""

    name: str
    help: str
    choices: tuple[str, ...] | None = None


EXPORT_OPTIONS = (  # each help names the formats that take the option
    ExportOption("name", "hf: the repo id the card's example loads (default: --out)"),
    ExportOption(
        "quantization", "ct2: weight type of the export (default float32: exact)", QUANTIZATIONS
    ),
)


def add_export_options(parser: argparse.ArgumentParser) -> None:
    """A flag per format option (--quantization, --name, ...), each saying its format."""
    for option in EXPORT_OPTIONS:
        flag = "--" + option.name.replace("_", "-")
        parser.add_argument(flag, choices=option.choices, help=option.help)


def export_options(args: argparse.Namespace) -> dict[str, object]:
    """The format options of parsed arguments (None: not given)."""
    return {option.name: getattr(args, option.name) for option in EXPORT_OPTIONS}
