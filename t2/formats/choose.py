"""Which format a folder is, and what the formats hold together: every format (the export
formats registered in t2.registry.EXPORT, then the run format, the fall-through), a format
by name, and the files a Hub download fetches (every format's)."""

from __future__ import annotations

from pathlib import Path

import t2.formats.ct2
import t2.formats.hf  # noqa: F401  (register the export formats)
from t2.formats.base import ModelFormat
from t2.formats.run import RunFormat
from t2.registry import EXPORT


def all_formats() -> list[ModelFormat]:
    """Every format, the export formats in registration order, then the run format."""
    return [*(EXPORT.get(name)() for name in EXPORT.names()), RunFormat()]


def format_named(name: str) -> ModelFormat:
    """The format called `name` (an Opened's kind)."""
    return next(fmt for fmt in all_formats() if fmt.name == name)


def format_of(folder: Path) -> ModelFormat:
    """The export format whose folder this is, else the run format (the fall-through)."""
    return next(fmt for fmt in all_formats() if fmt.detect(folder))  # run: always


def hub_files() -> list[str]:
    """Every file some format's folder holds: what a Hub repo id's download fetches, so
    that a pushed hf folder and a pushed CTranslate2 export open alike."""
    return sorted({name for fmt in all_formats() for name in fmt.files})
