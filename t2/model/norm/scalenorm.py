"""ScaleNorm, Nguyen & Salazar 2019, "Transformers without Tears: Improving the
Normalization of Self-Attention" (arXiv:1910.05895): g x / ||x||, one learned
scalar g for the whole layer, initialised to sqrt(d_model) (so that the output's root mean
square starts at 1, as LayerNorm's does). eps bounds ||x|| from below, as the authors'
code does: g x / max(||x||, eps)."""

from __future__ import annotations

import torch
from torch import nn

from t2.facts import Ct2, NormFacts
from t2.registry import NORM


@NORM.register(
    "scalenorm",
    NormFacts(
        params=lambda d_model: 1,  # g
        saved=lambda d_model: d_model,  # its input (and the factor g / ||x|| a row)
        ct2=Ct2(unexpressed="CTranslate2 has no ScaleNorm, only LayerNorm and RMSNorm"),
    ),
)
class ScaleNorm(nn.Module):
    """ScaleNorm, Nguyen & Salazar 2019: g * x / max(||x||_2, eps)."""

    def __init__(self, d_model: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.tensor(float(d_model) ** 0.5))  # g

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # the norm in float32 at least (a 16-bit sum of squares loses precision or
        # overflows); x times one factor a row keeps only x and the factor for backward
        wide = torch.promote_types(x.dtype, torch.float32)
        norm = torch.linalg.vector_norm(x, dim=-1, keepdim=True, dtype=wide)
        return x * (self.weight / norm.clamp_min(self.eps)).to(x.dtype)
