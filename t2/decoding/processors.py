"""Logits processors: each takes the scores of the next token (N, V) and returns new ones,
so temperature, top-k and top-p compose in a list (the pattern of transformers'
LogitsProcessor) and any strategy that draws from a distribution can use them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import torch

from t2.decoding.common import NEG_INF

if TYPE_CHECKING:
    from t2.decoding.options import DecodeConfig

Tensor = torch.Tensor


class Processor(Protocol):
    def __call__(self, logits: Tensor) -> Tensor: ...


@dataclass(frozen=True)
class Temperature:
    """softmax(logits / t): below 1 sharper, above 1 flatter."""

    t: float

    def __call__(self, logits: Tensor) -> Tensor:
        return logits / self.t


@dataclass(frozen=True)
class TopK:
    """Only the k highest scores stay (Fan et al. 2018)."""

    k: int

    def __call__(self, logits: Tensor) -> Tensor:
        if not 0 < self.k < logits.shape[-1]:
            return logits
        kth = logits.topk(self.k, dim=-1).values[:, -1:]  # (N, 1)
        return logits.masked_fill(logits < kth, NEG_INF)


@dataclass(frozen=True)
class TopP:
    """Only the smallest set of tokens whose probability reaches p stays (nucleus sampling,
    Holtzman et al. 2020); the most probable token always stays."""

    p: float

    def __call__(self, logits: Tensor) -> Tensor:
        if self.p >= 1.0:
            return logits
        ordered, index = logits.sort(dim=-1, descending=True)
        probs = ordered.softmax(dim=-1)
        before = probs.cumsum(dim=-1) - probs
        ordered = ordered.masked_fill(before >= self.p, NEG_INF)
        return torch.full_like(logits, NEG_INF).scatter(-1, index, ordered)


def processors(cfg: DecodeConfig) -> list[Processor]:
    """The decode section's processors in the order they apply: temperature, top-k, top-p."""
    out: list[Processor] = []
    if cfg.temperature != 1.0:
        out.append(Temperature(cfg.temperature))
    if cfg.top_k > 0:
        out.append(TopK(cfg.top_k))
    if cfg.top_p < 1.0:
        out.append(TopP(cfg.top_p))
    return out


def process(chain: list[Processor], logits: Tensor) -> Tensor:
    for processor in chain:
        logits = processor(logits)
    return logits
