"""Position-wise feed-forward networks: ReLU (Vaswani et al. 2017), GELU, and the GLU
variants SwiGLU / GeGLU (Shazeer 2020, arXiv:2002.05202)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from t2.model.config import gated_hidden_size
from t2.model.fused import Dropout, gated_projection
from t2.registry import FFN


class FeedForward(nn.Module):
    """FFN(x) = act(x W1 + b1) W2 + b2, the paper's position-wise network."""

    gated = False

    def __init__(self, d_model: int, d_ff: int, dropout: float, bias: bool, act: Callable) -> None:
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff, bias=bias)
        self.w2 = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = Dropout(dropout)
        self.act = act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(self.dropout(self.act(self.w1(x))))


class GatedFeedForward(nn.Module):
    """GLU variant, Shazeer 2020: (act(x W) * (x V)) W2 with hidden size 2/3 d_ff."""

    gated = True

    def __init__(self, d_model: int, d_ff: int, dropout: float, bias: bool, act: Callable) -> None:
        super().__init__()
        hidden = gated_hidden_size(d_ff)
        self.w_gate = nn.Linear(d_model, hidden, bias=bias)
        self.w_up = nn.Linear(d_model, hidden, bias=bias)
        self.w2 = nn.Linear(hidden, d_model, bias=bias)
        self.dropout = Dropout(dropout)
        self.act = act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.w_gate(x), self.w_up(x)
        if self.training and self.dropout.p > 0:
            return self.w2(self.dropout(self.act(gate) * up))
        # saves gate and up only; act(gate) * up is recomputed in backward (t2.model.fused)
        return gated_projection(gate, up, self.w2, self.act)


def _variant(base: type, act: Callable) -> Callable[..., nn.Module]:
    def build(d_model: int, d_ff: int, dropout: float, bias: bool) -> nn.Module:
        return base(d_model, d_ff, dropout, bias, act)

    build.gated = base.gated  # type: ignore[attr-defined]
    return build


FFN.register("relu")(_variant(FeedForward, F.relu))
FFN.register("gelu")(_variant(FeedForward, F.gelu))
FFN.register("swiglu")(_variant(GatedFeedForward, F.silu))
FFN.register("geglu")(_variant(GatedFeedForward, F.gelu))


def build_ffn(name: str, d_model: int, d_ff: int, dropout: float, bias: bool) -> nn.Module:
    return FFN.get(name)(d_model, d_ff, dropout, bias)
