"""Normalisation layers: LayerNorm (Ba et al. 2016) and RMSNorm (Zhang & Sennrich 2019)."""

from __future__ import annotations

import torch
from torch import nn

from t2.model.fused import rms_norm
from t2.registry import NORM


@NORM.register("layernorm")
class LayerNorm(nn.LayerNorm):
    """LayerNorm, Ba et al. 2016: gamma * (x - mean) / sqrt(var + eps) + beta."""

    def __init__(self, d_model: int, eps: float) -> None:
        super().__init__(d_model, eps=eps)


@NORM.register("rmsnorm")
class RMSNorm(nn.Module):
    """RMSNorm, Zhang & Sennrich 2019 (arXiv:1910.07467): gamma * x / sqrt(mean(x^2) + eps)."""

    def __init__(self, d_model: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # computed in float32; in training it saves only x and 1/rms (t2.model.fused)
        return rms_norm(x, self.weight, self.eps)


def build_norm(name: str, d_model: int, eps: float) -> nn.Module:
    return NORM.get(name)(d_model, eps)
