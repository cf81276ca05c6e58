"""What opening a model gives (`Opened`) and what an export format is (`ExportFormat`): a
registered class (t2.registry.EXPORT, `t2 export --format NAME`) that recognises its
folders, opens them as an engine and writes them from an opened model.

Registered: `hf` (t2.hub.pretrained: safetensors, config.json and the tokenizer, the
Hugging Face Hub's layout) and `ct2` (t2.serve.ct2: a CTranslate2 model folder).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from t2.config import Config
from t2.model.transformer import Transformer
from t2.serve.engine import Engine


@dataclass
class Opened:
    """A model a user pointed at, ready to translate: its engine, the run's config and
    tokenizer, the model itself where t2 computes with it (None for CTranslate2), what kind
    of folder it was and where it came from (recipe, checkpoint, step where known)."""

    engine: Engine
    cfg: Config
    tokenizer: Any
    kind: str  # "run" (a run directory or checkpoint) or an export format's name
    path: Path  # the checkpoint or folder read
    model: Transformer | None = None
    provenance: dict[str, Any] = field(default_factory=dict)


class ExportFormat(ABC):
    """One registered folder format: `detect`, `load` (open as an engine), `save`."""

    name: str = ""
    options: tuple[str, ...] = ()  # the `t2 export` options it takes, besides --out

    @staticmethod
    @abstractmethod
    def detect(folder: Path) -> bool:
        """Whether `folder` is one of this format's folders."""

    @abstractmethod
    def load(self, folder: Path, device: str, precision: str | None, workers: int) -> Opened:
        """Open the folder: its engine computes in `precision` (None: as stored)."""

    @abstractmethod
    def save(self, opened: Opened, out: Path, **options: Any) -> Path:
        """Write an opened t2 model (opened.model is set) to `out`, whole or not at all."""
