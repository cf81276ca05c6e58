"""The search strategies (decode.search), one registry: greedy and sampling
(t2.decoding.greedy), beam (t2.decoding.beam). Each takes the model, a padded source batch
(B, S) on its device, the decode settings and a random generator (sampling's), and returns
each sentence's n-best hypotheses."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

import t2.decoding.beam
import t2.decoding.greedy  # noqa: F401  (register the strategies)
from t2.decoding.common import Hypothesis
from t2.model.transformer import Transformer
from t2.registry import SEARCH

if TYPE_CHECKING:
    from t2.decoding.options import DecodeConfig


def search(
    model: Transformer, src: torch.Tensor, cfg: DecodeConfig,
    generator: torch.Generator | None = None,
) -> list[list[Hypothesis]]:  # fmt: skip
    """The n-best hypotheses of each sentence by the strategy cfg.search names."""
    return SEARCH.get(cfg.search)(model, src, cfg, generator)
