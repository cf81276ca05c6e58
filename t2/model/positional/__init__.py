"""Positional schemes (model.positional) behind one interface, one module each: none,
sinusoidal, learned, rope and alibi. Each registers with its facts
(t2.facts.PositionalFacts).

Additive schemes (sinusoidal, learned) act on the scaled token embeddings in `embed`;
rotary (RoPE) acts on queries and keys in `rotate` (one tensor) and `rotate_qkv` (the fused
projection, which self-attention calls); ALiBi adds a bias to self-attention's scores
(`attention_bias`). The methods a scheme does not use are the identity (no bias), so
attention never branches on a scheme's name.

RoPE and cross-attention: RoPE is applied to the self-attention of both stacks only.
In cross-attention a query is a target position and a key a source position; their
offset i - j compares positions in two different sentences and carries no meaning
(source and target lengths differ), so rotating them would inject a spurious relative
bias. The source's order already reaches cross-attention through the encoder's own
rotary self-attention, which is what RoFormer and later encoder-decoders with RoPE do.
ALiBi's bias is a function of the same offset i - j, so it too applies to self-attention
only, for the same reason.
"""

from __future__ import annotations

import torch
from torch import nn

from t2.model.interface import build
from t2.model.summary import as_declared
from t2.registry import POSITIONAL


class Positional(nn.Module):
    """The shared interface: every method is the identity (no bias, no table, nothing to
    draw) unless a scheme overrides it."""

    def __init__(self, d_model: int, d_head: int, max_positions: int, base: float) -> None:
        super().__init__()

    @property
    def max_length(self) -> int | None:
        """The most positions the scheme can encode; None: its tables grow on demand."""
        return None

    def embed(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """x: (B, T, D) scaled token embeddings at positions offset .. offset+T-1."""
        return x

    def rotate(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """x: (B, H, T, Dh) queries or keys at positions offset .. offset+T-1."""
        return x

    def rotate_qkv(self, qkv: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """qkv: (3, B, H, T, Dh) queries, keys and values; rotates queries and keys."""
        return qkv

    def attention_bias(
        self, n_queries: int, n_keys: int, offset: int, device: torch.device
    ) -> torch.Tensor | None:
        """An additive bias (1, H, Tq, Tk) for self-attention's scores of queries at
        positions offset .. offset+Tq-1 over keys at 0 .. Tk-1; None: no bias."""
        return None

    def added_table(self, n_positions: int) -> torch.Tensor | None:
        """The table (T, D) `embed` adds at positions 0 .. T-1 (what CTranslate2 takes as
        position_encodings); None: the scheme adds none."""
        return None

    def initialise(self, embedding_std: float) -> None:
        """Draw the scheme's parameters, if any, for embeddings drawn with this standard
        deviation (t2.model.init)."""


def build_positional(
    name: str, d_model: int, d_head: int, max_positions: int, base: float
) -> Positional:
    scheme = build(
        POSITIONAL,
        name,
        Positional,
        d_model=d_model,
        d_head=d_head,
        max_positions=max_positions,
        base=base,
    )
    params = POSITIONAL.facts(name).params(d_model, max_positions)
    return as_declared(POSITIONAL, name, scheme, params)
