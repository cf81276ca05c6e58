"""Absolute learned position embeddings, Gehring et al. 2017 (arXiv:1705.03122)."""

from __future__ import annotations

import math

import torch
from torch import nn

from t2.errors import ConfigError
from t2.facts import Ct2, PositionalFacts
from t2.model.positional import Positional
from t2.registry import POSITIONAL


@POSITIONAL.register(
    "learned",
    PositionalFacts(
        order=True,
        summary="a learned table added to the scaled embeddings",
        params=lambda d_model, max_positions: max_positions * d_model,
        ct2=Ct2(),  # the table as position_encodings
    ),
)
class LearnedPositional(Positional):
    """Absolute learned position embeddings (Gehring et al. 2017), added to the embeddings."""

    def __init__(self, d_model: int, d_head: int, max_positions: int, base: float) -> None:
        super().__init__(d_model, d_head, max_positions, base)
        self.weight = nn.Parameter(torch.empty(max_positions, d_model))
        # N(0, half the embedding variance), report 002: embeddings are N(0, 1/d_model);
        # `initialise` redraws it to follow model.embedding_init.
        nn.init.normal_(self.weight, std=math.sqrt(0.5 / d_model))

    @property
    def max_length(self) -> int:
        return self.weight.shape[0]

    def embed(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        end = offset + x.shape[1]
        if end > self.weight.shape[0]:
            raise ConfigError(
                f"sequence of {end} positions exceeds model.max_positions="
                f"{self.weight.shape[0]} of learned positions; raise model.max_positions"
            )
        return x + self.weight[offset:end].to(x.dtype)

    def added_table(self, n_positions: int) -> torch.Tensor:
        return self.weight[:n_positions].detach()

    def initialise(self, embedding_std: float) -> None:
        """Half the embeddings' variance (report 002)."""
        nn.init.normal_(self.weight, std=embedding_std * math.sqrt(0.5))
