"""RMSNorm, Zhang & Sennrich 2019 (arXiv:1910.07467)."""

from __future__ import annotations

import torch
from torch import nn

from t2.facts import Ct2, NormFacts
from t2.model.fused import rms_norm
from t2.registry import NORM


@NORM.register(
    "rmsnorm",
    NormFacts(
        params=lambda d_model: d_model,  # gamma
        saved=lambda d_model: d_model,  # its input (and 1/rms a row: t2.model.fused)
        ct2=Ct2({"rms_norm": True}),
    ),
)
class RMSNorm(nn.Module):
    """RMSNorm, Zhang & Sennrich 2019: gamma * x / sqrt(mean(x^2) + eps)."""

    def __init__(self, d_model: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # computed in float32; in training it saves only x and 1/rms (t2.model.fused)
        return rms_norm(x, self.weight, self.eps)
