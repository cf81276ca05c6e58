"""Position-wise feed-forward networks (model.ffn), one module each: relu (Vaswani et al.
2017), gelu, and the GLU variants swiglu and geglu (Shazeer 2020, arXiv:2002.05202). Each
is a module of (d_model, d_ff, dropout, bias) that registers with its facts
(t2.facts.FfnFacts); the two shapes they share are here."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from t2.facts import gated_hidden_size
from t2.model.fused import Dropout, gated_projection
from t2.model.interface import build, keeps_shape
from t2.model.summary import as_declared
from t2.registry import FFN

__all__ = ["FeedForward", "GatedFeedForward", "build_ffn", "gated_hidden_size"]


class FeedForward(nn.Module):
    """FFN(x) = act(x W1 + b1) W2 + b2, the paper's position-wise network."""

    act: Callable[[torch.Tensor], torch.Tensor]  # each variant's activation

    def __init__(self, d_model: int, d_ff: int, dropout: float, bias: bool) -> None:
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff, bias=bias)
        self.w2 = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(self.dropout(self.act(self.w1(x))))


class GatedFeedForward(nn.Module):
    """GLU variant, Shazeer 2020: (act(x W) * (x V)) W2 with hidden size 2/3 d_ff."""

    act: Callable[[torch.Tensor], torch.Tensor]  # each variant's activation of the gate

    def __init__(self, d_model: int, d_ff: int, dropout: float, bias: bool) -> None:
        super().__init__()
        hidden = gated_hidden_size(d_ff)
        self.w_gate = nn.Linear(d_model, hidden, bias=bias)
        self.w_up = nn.Linear(d_model, hidden, bias=bias)
        self.w2 = nn.Linear(hidden, d_model, bias=bias)
        self.dropout = Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.w_gate(x), self.w_up(x)
        if self.training and self.dropout.p > 0:
            return self.w2(self.dropout(self.act(gate) * up))
        # saves gate and up only; act(gate) * up is recomputed in backward (t2.model.fused)
        return gated_projection(gate, up, self.w2, self.act)


def build_ffn(name: str, d_model: int, d_ff: int, dropout: float, bias: bool) -> nn.Module:
    ffn = build(FFN, name, nn.Module, d_model=d_model, d_ff=d_ff, dropout=dropout, bias=bias)
    as_declared(FFN, name, ffn, FFN.facts(name).params(d_model, d_ff, bias))
    return keeps_shape(FFN, name, ffn, d_model)
