"""Translate sentences with a model in length-sorted batches, and evaluate a checkpoint."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from transformers import PreTrainedTokenizerFast

from t2.config import DecodeConfig
from t2.decoding.search import BOS, EOS, PAD, Hypothesis, search
from t2.errors import ConfigError, DataError
from t2.model.transformer import Transformer


def encode_sources(
    tokenizer: PreTrainedTokenizerFast, sentences: Sequence[str], src_bos: bool = False
) -> list[list[int]]:
    """Source ids as in training: tokens + EOS, BOS first when the run used data.src_bos."""
    ids = tokenizer(list(sentences), add_special_tokens=False)["input_ids"] if sentences else []
    return [([BOS] if src_bos else []) + row + [EOS] for row in ids]


def _check_lengths(
    model: Transformer, src_ids: Sequence[list[int]], lines: Sequence[int] | None
) -> None:
    """Learned positions have a fixed table: name the first line that does not fit."""
    if model.cfg.positional != "learned":
        return  # sinusoidal and rotary tables grow on demand
    limit = model.cfg.max_positions
    for i, row in enumerate(src_ids):
        if len(row) > limit:
            line = lines[i] if lines is not None else i + 1
            raise DataError(
                f"line {line} has {len(row)} tokens, more than model.max_positions={limit} "
                f"of learned positions; shorten or split that line"
            )


def pad_batch(rows: Sequence[list[int]], device: torch.device | str) -> torch.Tensor:
    """Right-padded (B, S) ids."""
    width = max(len(r) for r in rows)
    out = torch.full((len(rows), width), PAD, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return out.to(device)


def length_batches(lengths: Sequence[int], batch_size: int) -> Iterator[list[int]]:
    """Indices in batches of similar length (longest first), so little padding is decoded."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


def decode_ids(
    model: Transformer,
    src_ids: Sequence[list[int]],
    cfg: DecodeConfig,
    device: torch.device | str | None = None,
    lines: Sequence[int] | None = None,
) -> list[list[Hypothesis]]:
    """n-best hypotheses for each source (ids with EOS), batched by length, in input order;
    `lines` are the sources' line numbers for error messages (default 1, 2, ...)."""
    if cfg.batch_size < 1:
        raise ConfigError(f"decode.batch_size must be at least 1, got {cfg.batch_size}")
    _check_lengths(model, src_ids, lines)
    device = device if device is not None else next(model.parameters()).device
    out: list[list[Hypothesis]] = [[] for _ in src_ids]
    for batch in length_batches([len(r) for r in src_ids], cfg.batch_size):
        hyps = search(model, pad_batch([src_ids[i] for i in batch], device), cfg)
        for i, h in zip(batch, hyps, strict=True):
            out[i] = h
    return out


def translate(
    model: Transformer,
    tokenizer: PreTrainedTokenizerFast,
    sentences: Sequence[str],
    decode_cfg: DecodeConfig,
    device: torch.device | str | None = None,
    src_bos: bool = False,
) -> list[str]:
    """Detokenized best translation of each sentence, in input order; blank lines stay blank."""
    keep = [i for i, s in enumerate(sentences) if s.strip()]
    src_ids = encode_sources(tokenizer, [sentences[i] for i in keep], src_bos)
    was_training = model.training
    model.eval()
    try:
        hyps = decode_ids(model, src_ids, decode_cfg, device, [i + 1 for i in keep])
    finally:
        model.train(was_training)
    texts = tokenizer.batch_decode([h[0].tokens for h in hyps], skip_special_tokens=True)
    out = [""] * len(sentences)
    for i, text in zip(keep, texts, strict=True):
        out[i] = text.strip()
    return out
