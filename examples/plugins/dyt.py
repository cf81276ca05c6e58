"""Dynamic Tanh (DyT), Zhu, Chen, He, LeCun and Liu 2025, "Transformers without
Normalization" (arXiv:2503.10622): a norm layer replaced by an elementwise

    DyT(x) = gamma * tanh(alpha * x) + beta

with one learned scalar alpha (initialised to alpha_0 = 0.5, the paper's default outside
LLMs) and a per-channel gain gamma (ones) and shift beta (zeros). It computes no statistics
over the row, so it needs no eps (it takes the norm's arguments, and leaves eps unused).

A t2 plugin: `t2 train --recipe quickstart --plugin examples/plugins/dyt.py --set
model.norm=dyt` (README.md beside this file). It registers with the decorator t2's own
norms use, with its facts: what the parameter count, the memory model and the CTranslate2
export read (docs/components.md).
"""

from __future__ import annotations

import torch
from torch import nn

from t2.facts import Ct2, NormFacts
from t2.registry import NORM

ALPHA_0 = 0.5  # the paper's initial alpha for non-LLM Transformers (its section 7)


@NORM.register(
    "dyt",
    NormFacts(
        params=lambda d_model: 2 * d_model + 1,  # gamma and beta, one alpha
        saved=lambda d_model: 2 * d_model,  # its input (alpha's gradient) and tanh(alpha x)
        ct2=Ct2(unexpressed="CTranslate2 has no Dynamic Tanh (DyT) layer"),
    ),
)
class DynamicTanh(nn.Module):
    """DyT, Zhu et al. 2025: gamma * tanh(alpha * x) + beta over the last dimension."""

    def __init__(self, d_model: int, eps: float) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.tensor(ALPHA_0))
        self.weight = nn.Parameter(torch.ones(d_model))  # gamma
        self.bias = nn.Parameter(torch.zeros(d_model))  # beta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * torch.tanh(self.alpha * x) + self.bias
