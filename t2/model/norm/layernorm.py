"""LayerNorm, Ba et al. 2016 (arXiv:1607.06450)."""

from __future__ import annotations

from torch import nn

from t2.facts import Ct2, NormFacts
from t2.registry import NORM


@NORM.register(
    "layernorm",
    NormFacts(
        params=lambda d_model: 2 * d_model,  # gamma and beta
        saved=lambda d_model: d_model,  # its input (the mean and 1/std of a row aside)
        ct2=Ct2({"rms_norm": False}),
    ),
)
class LayerNorm(nn.LayerNorm):
    """LayerNorm, Ba et al. 2016: gamma * (x - mean) / sqrt(var + eps) + beta."""

    def __init__(self, d_model: int, eps: float) -> None:
        super().__init__(d_model, eps=eps)
