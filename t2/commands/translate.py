"""Translate text line by line: t2 translate --checkpoint TARGET [--input FILE] [--beam-size N]
[--search greedy|beam|sample]. TARGET is a run, a checkpoint, an exported folder or a hub
repo id; a CTranslate2 export (t2 export --format ct2) translates with CTranslate2. Reads
standard input by default and writes one line per input line (blank lines stay blank),
flushing after every batch; --nbest N writes N lines per input as
`INDEX ||| TRANSLATION ||| SCORE` (Moses n-best format). Back-translation samples:
--search sample [--temperature T --top-k K --top-p P --seed S] (reproducible by --seed)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TextIO

from t2.commands.options import (
    add_decode_arguments,
    add_engine_arguments,
    add_trust_argument,
    decode_changes,
    default_device,
)
from t2.errors import DataError

HELP = "translate standard input or a file line by line (n-best in Moses format)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--checkpoint",
        required=True,
        metavar="TARGET",
        help="a run directory (its best checkpoint), a checkpoint, an exported folder (hf or "
        "ct2) or a Hugging Face Hub repo id (owner/name)",
    )
    parser.add_argument("--input", help="file to translate (default: standard input)")
    parser.add_argument("--output", help="file to write (default: standard output)")
    add_decode_arguments(parser, nbest=True)
    add_engine_arguments(parser)
    add_trust_argument(parser)


def run(args: argparse.Namespace) -> None:
    if args.input and not Path(args.input).is_file():
        raise DataError(f"input file {args.input} not found; pass an existing file or use stdin")
    if args.output and not Path(args.output).parent.is_dir():
        raise DataError(f"output folder of {args.output} not found; create it or pass another")
    from t2.atomic import atomic_text  # after the checks: a mistake is told before torch loads
    from t2.opener import open_model

    device = default_device(args.device)
    opened = open_model(
        args.checkpoint,
        average_last=args.average_last,
        device=device,
        precision=args.precision,
        workers=args.workers,
        engine=args.engine,
        trust_plugins=args.trust_plugins,
    )
    engine = opened.engine
    decode = opened.cfg.decode.updated(**decode_changes(args))  # checked again
    with contextlib.ExitStack() as stack:
        if not args.input and hasattr(sys.stdin, "reconfigure"):  # strict, as for files
            sys.stdin.reconfigure(encoding="utf-8", errors="strict")
        source = (
            stack.enter_context(open(args.input, encoding="utf-8")) if args.input else sys.stdin
        )
        # a file appears under its name only when every line is written (t2.atomic)
        sink = stack.enter_context(atomic_text(args.output)) if args.output else sys.stdout
        lines = utf8_lines(source, args.input or "standard input")
        batches = engine.stream(lines, decode)
        write(batches, sink, decode.nbest)


def utf8_lines(source: TextIO, name: str) -> Iterator[str]:
    """Lines without their line ends; input that is not UTF-8 stops with a one-line error
    (decoding runs ahead in blocks, so the line named is where reading stopped)."""
    number = 0
    try:
        for number, line in enumerate(source, 1):  # noqa: B007  (read in the except)
            yield line.rstrip("\r\n")
    except UnicodeDecodeError as err:
        raise DataError(
            f"{name}: byte 0x{err.object[err.start]:02x} in line {number + 1} or later is not "
            f"UTF-8; convert the text, e.g. iconv -f latin1 -t utf-8"
        ) from None


def write(batches: Iterable[list[list[tuple[str, float]]]], sink: TextIO, nbest: int) -> None:
    """One line per input, or `nbest` lines in Moses format; flushed after every batch."""
    index = 0
    for batch in batches:
        for hyps in batch:
            if nbest == 1:
                sink.write(hyps[0][0] + "\n")
            else:
                sink.writelines(f"{index} ||| {text} ||| {score:.4f}\n" for text, score in hyps)
            index += 1
        sink.flush()
