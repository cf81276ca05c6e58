"""User-facing errors: each carries one line that names the problem and the fix."""

from __future__ import annotations

import traceback


class T2Error(Exception):
    """Base class for errors that entry scripts print as one line and exit non-zero."""

    exit_status = 2
    shown = True  # False: another process of the job prints the line (PreemptedError)


class ConfigError(T2Error):
    """An unknown recipe, key, component or a value of the wrong type."""


class DataError(T2Error):
    """Missing, misaligned, empty or undecodable data."""


class CheckpointError(T2Error):
    """A missing, incomplete or incompatible checkpoint."""


class DiskFullError(T2Error):
    """A write that found its device full: what it wrote, where, the space left, and what
    to do (`then`: a training run names the checkpoint to resume from)."""

    def __init__(self, what: str, folder: object, free: int | None, then: str = "") -> None:
        self.what, self.folder, self.free = what, folder, free
        self.then = then or "free space and run it again"
        left = "unknown" if free is None else f"{free / 2**20:.1f} MiB"
        super().__init__(
            f"no space left on the device of {folder} while writing {what} ({left} free); "
            f"{self.then}"
        )

    def resumable(self, then: str) -> DiskFullError:
        """The same fault, with the way to go on that only the caller knows."""
        return DiskFullError(self.what, self.folder, self.free, then)


class LostProcessError(T2Error):
    """Another process of a multi-process job stopped answering (train.collective_timeout)."""


class ExportError(T2Error):
    """A model an export format cannot express, or its engine is missing."""


class PreemptedError(T2Error):
    """Training stopped by a scheduler's signal after saving a checkpoint; the exit status
    is 128 + the signal's number, as a process ended by it (what schedulers read). The
    processes of a job that agreed on the step all exit so; the main one `shown` the line."""

    def __init__(self, message: str, signum: int, shown: bool = True) -> None:
        super().__init__(message)
        self.exit_status, self.shown = 128 + signum, shown


def failed_import(err: BaseException, what: str, home: str = "") -> ConfigError:
    """The import of `what` (a plugin, a package's component) that failed with `err`, as
    one line that says where: a SyntaxError's line, else the innermost frame in a file
    whose path contains `home` (the plugin's own file or package), else the innermost one
    outside Python's import machinery. A ConfigError (a registration t2 refused) keeps its
    own fix; any other error is the plugin's to fix at that line."""
    if isinstance(err, SyntaxError) and err.filename:
        file, line = err.filename, err.lineno
    else:
        frames = traceback.extract_tb(err.__traceback__)
        frames = [f for f in frames if "importlib" not in f.filename] or frames
        own = [f for f in frames if home and home in f.filename]
        last = (own or frames)[-1] if frames else None
        file, line = (last.filename, last.lineno) if last else ("", None)
    place = f"line {line}" if file == home else f"{file}, line {line}" if file else "its import"
    if isinstance(err, ConfigError):
        return ConfigError(f"{what}, at {place}: {err}")
    reason = str(err).strip().splitlines()[0] if str(err).strip() else ""
    detail = f"{type(err).__name__}: {reason}" if reason else type(err).__name__
    return ConfigError(f"{what} fails to import at {place} ({detail}); fix it there")
