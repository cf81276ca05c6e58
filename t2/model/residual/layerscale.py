"""LayerScale, Touvron et al. 2021, "Going deeper with Image Transformers" (CaiT,
arXiv:2103.17239), section 2: x_{l+1} = x_l + diag(lambda) f(x_l), lambda a learned vector
of d_model starting at a small epsilon: 0.1 for networks of up to 18 layers, 1e-5 up to
24, 1e-6 deeper (the paper's values for depths 18, 24 and beyond). The depth here is the
sublayer's own stack's (the encoder's N or the decoder's M): each stack is one residual
stream; base's 6 + 6 layers start at 0.1. It composes with either placement (CaiT's is
pre-norm, x + diag(lambda) f(LN(x)))."""

from __future__ import annotations

import torch
from torch import nn

from t2.facts import Ct2, ResidualFacts
from t2.model.residual import Connection, Depth
from t2.registry import RESIDUAL

Tensor = torch.Tensor


def initial_scale(layers: int) -> float:
    """CaiT's epsilon for a stack of `layers` layers."""
    return 0.1 if layers <= 18 else 1e-5 if layers <= 24 else 1e-6


@RESIDUAL.register(
    "layerscale",
    ResidualFacts(
        params=lambda d_model: d_model,  # lambda
        normed=True,
        placements=("post", "pre"),
        saved=lambda d_model: d_model,  # y, for lambda's gradient
        # lambda is folded exactly into the output projection (t2.serve.ct2_residual)
        ct2=Ct2(),
    ),
)
class LayerScale(Connection):
    """x + lambda * y, lambda (d_model,) learned from CaiT's epsilon for the depth."""

    def __init__(self, d_model: int, depth: Depth) -> None:
        super().__init__(d_model, depth)
        self.epsilon = initial_scale(depth.layers)
        self.scale = nn.Parameter(torch.full((d_model,), self.epsilon))

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return x + self.scale * y

    def coefficients(self) -> tuple[Tensor, Tensor]:
        return torch.tensor(1.0), self.scale.detach().clone()

    @torch.no_grad()
    def initialise(self, sublayer: nn.Module) -> None:
        self.scale.fill_(self.epsilon)
