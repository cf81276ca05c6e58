"""A run's model ready to use: the weights of a checkpoint (or the mean of the last N), its
config and the tokenizer it was trained with, each checked against the others."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from t2.config import Config
from t2.data.tokenizer import load_tokenizer
from t2.errors import CheckpointError
from t2.model.transformer import Transformer
from t2.rundir.average import average_checkpoints
from t2.rundir.layout import resolve
from t2.rundir.store import load_model, tokenizer_folder


def load_run(
    path: str | Path, average_last: int = 0, device: torch.device | str = "cpu"
) -> tuple[Transformer, Config, Any, Path]:
    """Model, config, tokenizer and checkpoint folder of a run directory or a checkpoint;
    with `average_last` N, the mean of the last N checkpoints (t2.rundir.average)."""
    ckpt = average_checkpoints(path, average_last) if average_last else resolve(path)
    model, cfg = load_model(ckpt, device)
    folder = tokenizer_folder(ckpt, cfg)
    tokenizer = load_tokenizer(folder)
    fix = "use the tokenizer of the same run"
    check_vocabulary(tokenizer, cfg, f"tokenizer {folder}", f"checkpoint {ckpt}", fix)
    return model, cfg, tokenizer, ckpt


def check_vocabulary(
    tokenizer: Any, cfg: Config, tokenizer_at: str, model_at: str, fix: str
) -> None:
    """The one check that a tokenizer has as many entries as the model's vocabulary (run
    directories, hf folders, both when read and when written)."""
    if len(tokenizer) != cfg.model.vocab_size:
        raise CheckpointError(
            f"{tokenizer_at} has {len(tokenizer)} tokens but {model_at} has a vocabulary of "
            f"{cfg.model.vocab_size}; {fix}"
        )
