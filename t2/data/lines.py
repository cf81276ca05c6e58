"""Lines of UTF-8 text files streamed into Arrow a block at a time, in bounded memory.

A line ends at "\\n" only (a U+2028 inside a sentence does not shift the alignment), one
"\\r" before it is dropped (CRLF files), and a last line without "\\n" counts. Line ends
are found with NumPy on the raw bytes and every block becomes one Arrow string array
without a Python string per line; Arrow checks the UTF-8, and a bad byte is reported with
its file and line.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import xxhash

from t2.errors import DataError

BLOCK = 16 << 20  # bytes read at a time
NEWLINE, CR = 10, 13


def _block_lines(data: bytes) -> pa.StringArray:
    """The lines of `data` (whole lines, each ending in "\\n") as one string array."""
    raw = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(raw == NEWLINE)
    starts = np.concatenate([[0], ends[:-1] + 1])
    crlf = (ends > starts) & (raw[np.maximum(ends - 1, 0)] == CR)
    keep = np.ones(len(raw), dtype=bool)
    keep[ends] = False
    keep[ends[crlf] - 1] = False
    offsets = np.concatenate([[0], np.cumsum(ends - starts - crlf)]).astype(np.int32)
    return pa.StringArray.from_buffers(
        len(ends), pa.py_buffer(offsets), pa.py_buffer(raw[keep].tobytes())
    )


def _utf8_error(path: Path, data: bytes, first_line: int) -> DataError:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = first_line + data.count(b"\n", 0, err.start)
        return DataError(
            f"{path}:{line}: not valid UTF-8 (byte 0x{data[err.start]:02x}); convert the file "
            f"to UTF-8, e.g. iconv -f latin1 -t utf-8"
        )
    raise AssertionError("Arrow rejected UTF-8 that Python accepts")


def _open(path: Path) -> BinaryIO:
    try:
        return open(path, "rb")  # noqa: SIM115  (the caller closes it)
    except FileNotFoundError:
        raise DataError(f"{path}: file not found; check the files:PREFIX source") from None
    except OSError as err:
        raise DataError(f"{path}: cannot be read ({err.strerror}); check the path") from None


def one_line(text: str) -> str:
    """A sentence as a line of a run's files (t2.rundir's write_lines) and of the references
    a run is scored against (t2.data.references): its own line breaks become spaces."""
    return " ".join(text.splitlines())


def content_hash(path: Path, block: int = BLOCK) -> str:
    """A fast hash of a file's bytes (xxh3, 128 bits), streamed a block at a time: what a
    cache key holds for a file, so a same-size copy with its old time is another source."""
    digest = xxhash.xxh3_128()
    with _open(path) as f:
        while chunk := f.read(block):
            digest.update(chunk)
    return digest.hexdigest()


def count_lines(path: Path, block: int = BLOCK) -> int:
    """The lines of a file as read_lines counts them (a last line without "\\n" too)."""
    count, last = 0, b"\n"
    with _open(path) as f:
        while chunk := f.read(block):
            count += chunk.count(b"\n")
            last = chunk[-1:]
    return count + (last != b"\n")


def read_lines(path: Path, block: int = BLOCK) -> Iterator[pa.StringArray]:
    """The file's lines, a block's worth at a time; one-line DataErrors for a missing,
    unreadable, non-UTF-8 or empty file."""
    with _open(path) as f:
        carry, line, text = b"", 1, False
        while True:
            chunk = f.read(block)
            data = carry + chunk
            cut = len(data) if not chunk else data.rfind(b"\n") + 1
            if not chunk and data and not data.endswith(b"\n"):
                data += b"\n"  # the last line, without its newline
                cut = len(data)
            whole, carry = data[:cut], data[cut:]
            if whole:
                lines = _block_lines(whole)
                try:
                    lines.validate(full=True)
                except pa.ArrowInvalid:
                    raise _utf8_error(path, whole, line) from None
                text = text or bool(whole.decode("utf-8").strip())  # until a block has some
                line += len(lines)
                yield lines
            if not chunk:
                break
    if not text:
        raise DataError(f"{path}: file is empty; point the source at a file with sentences")


def rechunk(arrays: Iterator[pa.StringArray], rows: int) -> Iterator[pa.Array]:
    """The same strings in arrays of exactly `rows` (the last one shorter)."""
    held: list[pa.Array] = []
    count = 0
    for array in arrays:
        held.append(array)
        count += len(array)
        while count >= rows:
            joined = pa.concat_arrays(held)
            yield joined.slice(0, rows)
            held, count = [joined.slice(rows)], count - rows
    if count:
        yield pa.concat_arrays(held)


def paired_lines(
    src: Path, tgt: Path, rows: int, block: int = BLOCK
) -> Iterator[tuple[pa.Array, pa.Array]]:
    """Line i of `src` beside line i of `tgt`, `rows` at a time; a DataError naming both
    counts when the files are not line-aligned."""
    ours, theirs = rechunk(read_lines(src, block), rows), rechunk(read_lines(tgt, block), rows)
    counts = [0, 0]
    for a, b in zip(ours, theirs, strict=False):
        counts[0], counts[1] = counts[0] + len(a), counts[1] + len(b)
        if len(a) != len(b):
            break
        yield a, b
    counts[0] += sum(len(a) for a in ours)
    counts[1] += sum(len(b) for b in theirs)
    if counts[0] != counts[1]:
        raise DataError(
            f"{src} has {counts[0]} lines but {tgt} has {counts[1]}; the files must be "
            f"line-aligned (line i translates line i)"
        )
