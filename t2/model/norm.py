"""Normalisation layers: LayerNorm (Ba et al. 2016) and RMSNorm (Zhang & Sennrich 2019)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

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
        # PyTorch's fused kernel; it upcasts internally, so bf16 inputs stay accurate.
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def build_norm(name: str, d_model: int, eps: float) -> nn.Module:
    return NORM.get(name)(d_model, eps)
