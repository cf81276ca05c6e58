"""User-facing errors: each carries one line that names the problem and the fix."""


class T2Error(Exception):
    """Base class for errors that entry scripts print as one line and exit non-zero."""


class ConfigError(T2Error):
    """An unknown recipe, key, component or a value of the wrong type."""


class DataError(T2Error):
    """Missing, misaligned, empty or undecodable data."""


class CheckpointError(T2Error):
    """A missing, incomplete or incompatible checkpoint."""
