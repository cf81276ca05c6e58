"""Files and folders that appear under their final name only when complete (fairseq's and
every careful tool's rule): written beside it under a hidden name, then renamed over it.
The one owner of that rule for text outputs and whole folders."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TextIO


@contextlib.contextmanager
def atomic_file(path: str | Path, binary: bool = False) -> Iterator[IO]:
    """A file (UTF-8 text, or bytes) that becomes `path` when the block ends without an
    error; an error or an interruption (Ctrl-C) leaves `path` as it was and no temporary
    file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".part")
    try:
        with os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_text(path: str | Path) -> contextlib.AbstractContextManager[TextIO]:
    """atomic_file for UTF-8 text."""
    return atomic_file(path)


@contextlib.contextmanager
def atomic_folder(path: str | Path) -> Iterator[Path]:
    """A new folder to fill that replaces `path` when the block ends without an error; an
    error or an interruption leaves `path` as it was and no temporary folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{path.name}-", dir=path.parent))
    try:
        yield tmp
        if path.exists():
            shutil.rmtree(path)
        tmp.rename(path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # nothing left once renamed
