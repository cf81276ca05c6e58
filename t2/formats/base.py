"""What every model format's reader gives (`Opened`: an engine and the `Bundle` of model,
config, tokenizer and decode defaults) and what a model format is (`ModelFormat`): a class
that recognises its folders, names the files they hold (what a Hub download fetches),
opens them and, for the exportable ones (t2.formats.export, `t2 export --format NAME`),
writes them from an opened model. What the opener needs to know of a format it asks the
format (its attributes), never its name or class."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from t2.config import Config, DecodeConfig
from t2.hub.pretrained import Bundle
from t2.model.transformer import Transformer
from t2.serve.engine import Engine


@dataclass
class Opened:
    """A model a user pointed at, ready to translate: its engine and its bundle (the run's
    config and tokenizer, the model itself where t2 computes with it, None for CTranslate2;
    where it was read), what kind of folder it was and where it came from (recipe,
    checkpoint, step where known)."""

    engine: Engine
    bundle: Bundle
    kind: str  # "run" (a run directory or checkpoint) or an export format's name
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def model(self) -> Transformer | None:
        return self.bundle.model

    @property
    def cfg(self) -> Config:
        return self.bundle.config

    @property
    def tokenizer(self) -> Any:
        return self.bundle.tokenizer

    @property
    def path(self) -> Path | None:
        """The checkpoint or folder read."""
        return self.bundle.path

    @property
    def decode(self) -> DecodeConfig:
        """The decode defaults the run chose (its config's decode section)."""
        return self.bundle.decode


class ModelFormat(ABC):
    """One folder format: `detect`, `load` (open as an engine), `save`, its `files`."""

    name: str = ""
    holds: str = ""  # what marks its folders, in a phrase (the error for a folder of none)
    options: tuple[str, ...] = ()  # the `t2 export` options it takes, besides --out
    files: tuple[str, ...] = ()  # what its folders hold: what a Hub download fetches
    engine: str = ""  # the engine that reads its folders (--engine; t2.formats.options)
    averages: bool = False  # its folders hold several checkpoints: --average-last N
    parallel: bool = False  # its engine decodes several batches at once: --workers N
    # its folders are written by `t2 train` (never downloaded): their own plugin copies run
    # without --trust-plugins (t2.rundir.plugins)
    own_plugins: bool = False

    @staticmethod
    @abstractmethod
    def detect(folder: Path) -> bool:
        """Whether `folder` is one of this format's folders."""

    @abstractmethod
    def load(
        self, folder: Path, device: str, precision: str | None, workers: int, average_last: int
    ) -> Opened:
        """Open the folder: its engine computes in `precision` (None: as stored) with
        `workers` batches at once (1 unless `parallel`) and the mean of the last
        `average_last` checkpoints (0 unless `averages`)."""

    @abstractmethod
    def save(self, opened: Opened, out: Path, **options: Any) -> Path:
        """Write an opened t2 model (opened.model is set) to `out`, whole or not at all."""
