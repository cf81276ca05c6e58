"""The paper's residual connection, Vaswani et al. 2017 (arXiv:1706.03762), section 3.1."""

from __future__ import annotations

import torch

from t2.facts import Ct2, ResidualFacts
from t2.model.residual import Connection
from t2.registry import RESIDUAL

Tensor = torch.Tensor


@RESIDUAL.register(
    "plain",
    ResidualFacts(
        params=lambda d_model: 0,
        normed=True,
        placements=("post", "pre"),
        ct2=Ct2(),  # CTranslate2's own: y + g(y)
    ),
)
class Plain(Connection):
    """x + y: the sum of the stream and the sublayer's output."""

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return x + y

    def coefficients(self) -> tuple[Tensor, Tensor]:
        return torch.tensor(1.0), torch.tensor(1.0)
