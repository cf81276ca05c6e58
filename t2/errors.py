"""User-facing errors: each carries one line that names the problem and the fix."""


class T2Error(Exception):
    """Base class for errors that entry scripts print as one line and exit non-zero."""

    exit_status = 2


class ConfigError(T2Error):
    """An unknown recipe, key, component or a value of the wrong type."""


class DataError(T2Error):
    """Missing, misaligned, empty or undecodable data."""


class CheckpointError(T2Error):
    """A missing, incomplete or incompatible checkpoint."""


class ExportError(T2Error):
    """A model an export format cannot express, or its engine is missing."""


class PreemptedError(T2Error):
    """Training stopped by a scheduler's signal after saving a checkpoint; the exit status
    is 128 + the signal's number, as a process ended by it (what schedulers read)."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.exit_status = 128 + signum
