"""The one check that a model's tokenizer fits it, which every reader and writer of a
model makes (t2.formats.run.load_run, t2.hub.pretrained, the ct2 format)."""

from __future__ import annotations

from typing import Any

from t2.config import Config
from t2.errors import CheckpointError


def check_vocabulary(
    tokenizer: Any, cfg: Config, tokenizer_at: str, model_at: str, fix: str
) -> None:
    """That a tokenizer has as many entries as the model's vocabulary (run directories, hf
    folders, CTranslate2 exports; when read and when written)."""
    if len(tokenizer) != cfg.model.vocab_size:
        raise CheckpointError(
            f"{tokenizer_at} has {len(tokenizer)} tokens but {model_at} has a vocabulary of "
            f"{cfg.model.vocab_size}; {fix}"
        )
