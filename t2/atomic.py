"""Files and folders that appear under their final name only when complete (fairseq's and
every careful tool's rule): written beside it under a hidden name, then renamed over it.
The one owner of that rule for text outputs and whole folders, and of what a full disk
looks like to the user: `writing` turns it into one line, wherever t2 writes."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TextIO

from t2.errors import DiskFullError, T2Error

# a failed write that leaves less than this free on its device was a full disk, whatever
# the error says (PyTorch's zip writer: "unexpected pos 54400 vs 54288", no errno)
LOW_SPACE = 64 << 20
FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def free_bytes(folder: str | Path) -> int | None:
    """Free bytes on the device of `folder` (or of its nearest existing parent)."""
    folder = Path(folder).absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def is_full_disk(err: BaseException, folder: str | Path) -> bool:
    """A write failed for a full disk: its error number (ENOSPC, EDQUOT, on it or on an
    error it came from), or less than LOW_SPACE free on the device after the failure."""
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in FULL_ERRNOS:
            return True
        seen = seen.__cause__ or seen.__context__
    free = free_bytes(folder)
    return free is not None and free < LOW_SPACE


@contextlib.contextmanager
def writing(what: str | Path, folder: str | Path) -> Iterator[None]:
    """A write of `what` into `folder`: a full disk there ends it as a DiskFullError (one
    line: what, the device, the space free). Measured before the caller removes what it
    half wrote, so free space reads as the failure left it."""
    try:
        yield
    except T2Error:
        raise
    except Exception as err:
        if not is_full_disk(err, folder):
            raise
        raise DiskFullError(str(what), Path(folder), free_bytes(folder)) from None


@contextlib.contextmanager
def atomic_file(path: str | Path, binary: bool = False) -> Iterator[IO]:
    """A file (UTF-8 text, or bytes) that becomes `path` when the block ends without an
    error; an error or an interruption (Ctrl-C) leaves `path` as it was and no temporary
    file."""
    path = Path(path)
    tmp = None
    try:
        with writing(path, path.parent):
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".part")
            with os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8") as f:
                yield f
            os.replace(tmp, path)
    except BaseException:
        if tmp is not None:
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
    tmp = None
    try:
        with writing(path, path.parent):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{path.name}-", dir=path.parent))
            yield tmp
            if path.exists():
                shutil.rmtree(path)
            tmp.rename(path)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)  # nothing left once renamed


def sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, read a MiB at a time: the checksum that checkpoints
    and the data cache keep beside what they write."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
