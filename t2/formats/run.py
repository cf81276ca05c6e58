"""The `run` format: a run directory (its best checkpoint, else its latest complete one)
or one checkpoint folder, read by t2's own engine. It is what training writes
(t2.rundir.store), so it is not an export target, and runs are not put on the Hub: it
names no files to download. It claims the folders that are a run directory or a
checkpoint (t2.rundir.is_run_or_checkpoint); its reader (`load_run`, a Bundle like every
reader's) names what is wrong with one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from t2.data.tokenizer import load_tokenizer
from t2.errors import CheckpointError
from t2.formats.base import ModelFormat, Opened
from t2.hub.pretrained import Bundle
from t2.rundir import (
    RunDir,
    average_checkpoints,
    check_vocabulary,
    is_run_or_checkpoint,
    load_model,
    read_meta,
    resolve,
    tokenizer_folder,
)
from t2.serve.engine import TorchEngine


def load_run(
    path: str | Path,
    average_last: int = 0,
    device: torch.device | str = "cpu",
    trust_plugins: bool = False,
) -> Bundle:
    """The bundle of a run directory (its best checkpoint, else its latest complete one) or
    a checkpoint: the weights, the config and the tokenizer the run was trained with, each
    checked against the others; with `average_last` N, the mean of the last N checkpoints
    (t2.rundir.average). Its `path` is the checkpoint read. The run's plugins run unless
    it was downloaded, then only with `trust_plugins` (t2.rundir.plugins.may_run_kept)."""
    average = average_last and average_checkpoints(path, average_last, None, trust_plugins)
    ckpt = Path(average or resolve(path))
    model, cfg = load_model(ckpt, device, trust_plugins)
    folder = tokenizer_folder(ckpt, cfg)
    tokenizer = load_tokenizer(folder)
    fix = "use the tokenizer of the same run"
    check_vocabulary(tokenizer, cfg, f"tokenizer {folder}", f"checkpoint {ckpt}", fix)
    return Bundle(model, cfg, tokenizer, ckpt)


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
    """A run directory (its best checkpoint, else its latest) or a checkpoint."""

    name = "run"
    holds = "a run directory or checkpoint holds config.yaml"
    engine = "t2"
    averages = True
    own_plugins = True

    @staticmethod
    def detect(folder: Path) -> bool:
        return is_run_or_checkpoint(folder)

    def load(
        self, folder: Path, device: str, precision: str | None, workers: int, average_last: int
    ) -> Opened:
        """`average_last` N: the mean of the run's last N checkpoints (t2.rundir.average)."""
        bundle = load_run(folder, average_last, device)
        src_bos = bundle.config.data.src_bos
        engine = TorchEngine(bundle.t2_model(), bundle.tokenizer, src_bos, device, precision)
        return Opened(engine, bundle, self.name, provenance(bundle.path or folder))

    def save(self, opened: Opened, out: Path, **options: Any) -> Path:
        raise CheckpointError("a run directory is written by training (t2 train), not exported")
