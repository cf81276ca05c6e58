"""Translate text line by line: python evaluation/translate.py --checkpoint RUN_OR_CHECKPOINT
[--input FILE] [--beam N]. Reads standard input by default and writes one line per input
line (blank lines stay blank), flushing after every batch; --nbest N writes N lines per
input as `INDEX ||| TRANSLATION ||| SCORE` (Moses n-best format)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TextIO

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from t2.cli import run_main  # noqa: E402
from t2.errors import DataError  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--checkpoint", required=True, help="a run directory or a checkpoint")
    parser.add_argument("--input", help="file to translate (default: standard input)")
    parser.add_argument("--output", help="file to write (default: standard output)")
    parser.add_argument("--beam", type=int, help="beam size (1: greedy); default: the run's")
    parser.add_argument("--lenpen", type=float, help="GNMT length penalty alpha")
    parser.add_argument("--batch-size", type=int, help="sentences per batch (and per flush)")
    parser.add_argument("--nbest", type=int, default=1, help="hypotheses per line (<= beam)")
    parser.add_argument("--average-last", type=int, default=0, metavar="N",
                        help="average the last N checkpoints' weights first")  # fmt: skip
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda if present)")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    import dataclasses

    import torch

    from t2.evaluation.evaluate import translate_stream
    from t2.rundir import load_run

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    model, cfg, tokenizer, _ = load_run(args.checkpoint, args.average_last, device)
    changes = {"beam_size": args.beam, "lenpen": args.lenpen, "batch_size": args.batch_size}
    decode = dataclasses.replace(
        cfg.decode, nbest=args.nbest, **{k: v for k, v in changes.items() if v is not None}
    )
    if args.nbest > decode.beam_size:
        raise DataError(f"--nbest {args.nbest} needs --beam of at least {args.nbest}")
    if args.input and not Path(args.input).is_file():
        raise DataError(f"input file {args.input} not found; pass an existing file or use stdin")
    if args.output and not Path(args.output).parent.is_dir():
        raise DataError(f"output folder of {args.output} not found; create it or pass another")
    with contextlib.ExitStack() as stack:
        if not args.input and hasattr(sys.stdin, "reconfigure"):  # strict, as for files
            sys.stdin.reconfigure(encoding="utf-8", errors="strict")
        source = (
            stack.enter_context(open(args.input, encoding="utf-8")) if args.input else sys.stdin
        )
        sink = (
            stack.enter_context(open(args.output, "w", encoding="utf-8"))
            if args.output
            else sys.stdout
        )
        lines = utf8_lines(source, args.input or "standard input")
        batches = translate_stream(model, tokenizer, lines, decode, device, cfg.data.src_bos)
        write(batches, sink, args.nbest)


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


if __name__ == "__main__":
    run_main(main)
