"""Which format a folder is, and what the formats hold together: every format (the export
formats of t2.registry.EXPORT, then the run format), a format by name, and the files a Hub
download fetches (every format's). A folder is of the one format that claims it; a folder
no format claims, or more than one, is an error that says what each format's folders hold.
A folder from the Hub (t2.rundir.downloaded.is_downloaded: a cache snapshot, a `hf download
--local-dir` folder) is never taken for a folder of a format that t2 writes only by
training (`own_plugins`: the run format), so its plugin code never runs untrusted; which
plugins a reader imports it decides once, from the format (`import_kept`)."""

from __future__ import annotations

from pathlib import Path

from t2.errors import CheckpointError, ConfigError
from t2.formats.base import ModelFormat
from t2.formats.run import RunFormat
from t2.model.interface import build
from t2.registry import EXPORT
from t2.rundir import load_kept
from t2.rundir.downloaded import is_downloaded


def export_format(name: str) -> ModelFormat:
    """The export format registered as `name`, checked to be a ModelFormat."""
    return build(EXPORT, name, ModelFormat)


def all_formats() -> list[ModelFormat]:
    """Every format, the export formats by name, then the run format."""
    return [*(export_format(name) for name in EXPORT.names()), RunFormat()]


def format_named(name: str) -> ModelFormat:
    """The format called `name` (an Opened's kind), or a ConfigError listing them."""
    formats = {fmt.name: fmt for fmt in all_formats()}
    if name not in formats:
        raise ConfigError(f"unknown model format {name!r}; valid: {', '.join(formats)}")
    return formats[name]


def format_of(folder: Path) -> ModelFormat:
    """The format whose folder `folder` is (see the module doc)."""
    folder = Path(folder)
    if not folder.is_dir():
        what = "is a file" if folder.exists() else "not found"
        raise CheckpointError(
            f"{folder} {what}; pass a run directory, a checkpoint or a model folder"
        )
    downloaded = is_downloaded(folder)
    formats = [fmt for fmt in all_formats() if not (downloaded and fmt.own_plugins)]
    claims = [fmt.name for fmt in formats if fmt.detect(folder)]
    if len(claims) == 1:
        return format_named(claims[0])
    if not claims and downloaded:
        holds = "; ".join(fmt.holds for fmt in formats)
        raise CheckpointError(
            f"{folder} was downloaded from the Hugging Face Hub and is no exported model "
            f"folder ({holds}); t2 opens a run directory only where it was trained: export "
            f"it there (t2 export RUN --format hf)"
        )
    if not claims:
        holds = "; ".join(fmt.holds for fmt in all_formats())
        raise CheckpointError(
            f"no complete checkpoint under {folder}, nor a folder of another format ({holds}); "
            f"train first or pass one"
        )
    raise CheckpointError(
        f"{folder} holds the files of several formats ({', '.join(claims)}); keep one "
        f"model in a folder"
    )


def import_kept(folder: Path, fmt: ModelFormat, trust_plugins: bool) -> None:
    """Import the plugins `folder`, a folder of format `fmt`, keeps: a run's own copies,
    any other format's only when the caller trusts them (t2.rundir.plugins). The one trust
    decision of every reader: the opener, and t2.cli before it builds its parser."""
    load_kept(folder, trust_plugins, own=fmt.own_plugins)


def hub_files() -> list[str]:
    """Every file some format's folder holds: what a Hub repo id's download fetches, so
    that a pushed hf folder and a pushed CTranslate2 export open alike."""
    return sorted({name for fmt in all_formats() for name in fmt.files})
