"""ReZero, Bachlechner et al. 2020, "ReZero is All You Need: Fast Convergence at Large
Depth" (arXiv:2003.04887): x_{i+1} = x_i + alpha_i F(x_i), alpha_i a learned scalar that
starts at 0, so that every sublayer starts as the identity, and no normalisation.

One alpha per sublayer (the paper's F is a sublayer; the authors' PyTorch layers share one
between a layer's attention and feed-forward). The sublayers have no norm whatever
model.norm says; model.norm_position then decides the stacks' ends: `pre` keeps model.norm
once after each stack (as every pre-norm stack ends), `post` has no norm at all, the
paper's ReZero Transformer."""

from __future__ import annotations

import torch
from torch import nn

from t2.facts import Ct2, ResidualFacts
from t2.model.residual import Connection, Depth
from t2.registry import RESIDUAL

Tensor = torch.Tensor


@RESIDUAL.register(
    "rezero",
    ResidualFacts(
        params=lambda d_model: 1,  # alpha
        normed=False,
        placements=("post", "pre"),
        saved=lambda d_model: d_model,  # y, for alpha's gradient
        ct2=Ct2(
            unexpressed="CTranslate2 normalises every sublayer, and ReZero's sublayers have no norm"
        ),
    ),
)
class ReZero(Connection):
    """x + alpha y, alpha learned from 0."""

    def __init__(self, d_model: int, depth: Depth) -> None:
        super().__init__(d_model, depth)
        self.alpha = nn.Parameter(torch.zeros(()))

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return x + self.alpha * y

    def coefficients(self) -> tuple[Tensor, Tensor]:
        return torch.tensor(1.0), self.alpha.detach().clone()

    @torch.no_grad()
    def initialise(self, sublayer: nn.Module) -> None:
        self.alpha.zero_()
