"""The `run` format: a run directory (its best checkpoint, else its latest complete one)
or one checkpoint folder, read by t2's own engine. It is what training writes
(t2.rundir.store), so it is not an export target, and runs are not put on the Hub: it
names no files to download. Any folder no other format claims is read as a run, whose
reader names what is wrong with it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from t2.errors import CheckpointError
from t2.formats.base import ModelFormat, Opened
from t2.formats.options import ENGINES
from t2.rundir import RunDir, load_run, read_meta
from t2.serve.engine import TorchEngine


def provenance(ckpt: Path) -> dict[str, Any]:
    """Recipe, step and checkpoint of a run's checkpoint, as far as its files say."""
    found: dict[str, Any] = {"checkpoint": str(ckpt)}
    for folder, key in ((RunDir.of(ckpt).path, "recipe"), (ckpt, "step")):
        try:
            found[key] = read_meta(folder).get(key)
        except CheckpointError:  # an average written outside a run directory
            found[key] = None
    return found


class RunFormat(ModelFormat):
    """A run directory or a checkpoint; the formats' fall-through (t2.formats.kind_of)."""

    name = "run"
    engine = ENGINES["run"]

    @staticmethod
    def detect(folder: Path) -> bool:
        return True  # asked last: whatever no export format claims

    def load(
        self,
        folder: Path,
        device: str,
        precision: str | None,
        workers: int,
        average_last: int = 0,
    ) -> Opened:
        """`average_last` N: the mean of the run's last N checkpoints (t2.rundir.average)."""
        model, cfg, tokenizer, ckpt = load_run(folder, average_last, device)
        engine = TorchEngine(model, tokenizer, cfg.data.src_bos, device, precision)
        ckpt = Path(ckpt)
        return Opened(engine, cfg, tokenizer, self.name, ckpt, engine.model, provenance(ckpt))

    def save(self, opened: Opened, out: Path, **options: Any) -> Path:
        raise CheckpointError("a run directory is written by training (t2 train), not exported")
