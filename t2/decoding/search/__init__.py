"""The entry to decoding: the search strategies (decode.search), one module each (greedy,
sample, beam), each a strategy of the one loop (t2.decoding.loop). Each registered name
makes its strategy object from the decode settings and a random generator (sampling's)
and comes with its facts (t2.facts.SearchFacts); `search` runs it in the loop over a
padded source batch (B, S) and returns each sentence's n-best hypotheses."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from t2.decoding.common import Hypothesis
from t2.decoding.loop import Strategy, generate
from t2.model.interface import build
from t2.model.transformer import Transformer
from t2.registry import SEARCH

if TYPE_CHECKING:
    from t2.decoding.options import DecodeConfig


def search(
    model: Transformer,
    src: torch.Tensor,
    cfg: DecodeConfig,
    generator: torch.Generator | None = None,
    lengths: torch.Tensor | None = None,
) -> list[list[Hypothesis]]:
    """The n-best hypotheses of each sentence by the strategy cfg.search names; `lengths`
    (B,) overrides the maximum output lengths of cfg.max_len_a and cfg.max_len_b."""
    if generator is None:  # sampling's draws: the same seed, the same output
        generator = torch.Generator(src.device).manual_seed(cfg.seed)
    strategy = build(SEARCH, cfg.search, Strategy, decode=cfg, generator=generator)
    return generate(model, src, cfg, strategy, lengths)
