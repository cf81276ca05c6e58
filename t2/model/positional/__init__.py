"""Positional schemes (model.positional) behind one interface, one module each: none,
sinusoidal, learned, rope, alibi, relative (Shaw et al. 2018) and t5 (Raffel et al. 2020).
Each registers with its facts (t2.facts.PositionalFacts).

Additive schemes (sinusoidal, learned) act on the scaled token embeddings in `embed`;
rotary (RoPE) acts on queries and keys in `rotate` (one tensor) and `rotate_qkv` (the fused
projection, which self-attention calls); ALiBi and T5 add a bias to self-attention's scores
(`attention_bias`), Shaw's relative positions a bias of the queries and a term of the
attention probabilities to the output (`attention_values`). A scheme whose parameters
belong to each self-attention layer (Shaw's tables, T5's bias) makes them in `layer_part`,
which the layer keeps and passes back. The methods a scheme does not use are the identity
(no bias, no part), so attention never branches on a scheme's name.

RoPE and cross-attention: RoPE is applied to the self-attention of both stacks only.
In cross-attention a query is a target position and a key a source position; their
offset i - j compares positions in two different sentences and carries no meaning
(source and target lengths differ), so rotating them would inject a spurious relative
bias. The source's order already reaches cross-attention through the encoder's own
rotary self-attention, which is what RoFormer and later encoder-decoders with RoPE do.
ALiBi's bias, T5's and Shaw's relative positions are functions of the same offset i - j,
so they too apply to self-attention only, for the same reason (T5 and Shaw et al. do so).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

import torch
from torch import nn

from t2.model.interface import build
from t2.model.summary import as_declared
from t2.registry import POSITIONAL

T = TypeVar("T")


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

    def layer_part(self, causal: bool) -> nn.Module | None:
        """The scheme's parameters that a self-attention layer keeps, made as the layer is
        built (`causal`: a decoder's); the layer passes it back to the methods below. None:
        the scheme keeps none per layer."""
        return None

    def attention_bias(
        self, q: torch.Tensor, n_keys: int, offset: int, part: nn.Module | None = None
    ) -> torch.Tensor | None:
        """An additive bias (1 or B, H, Tq, Tk) for self-attention's scores of the queries
        q (B, H, Tq, Dh) at positions offset .. offset+Tq-1 over keys at 0 .. Tk-1, added
        after q k^T / sqrt(Dh); None: no bias."""
        return None

    def attention_values(
        self, n_queries: int, n_keys: int, offset: int, part: nn.Module | None = None
    ) -> Callable[[torch.Tensor], torch.Tensor] | None:
        """A term added to self-attention's output, a function of its probabilities (B, H,
        Tq, Tk) giving (B, H, Tq, Dh), for queries and keys at the positions of
        `attention_bias`; None: none. A scheme with one says `weights` in its facts."""
        return None

    def added_table(self, n_positions: int) -> torch.Tensor | None:
        """The table (T, D) `embed` adds at positions 0 .. T-1 (what CTranslate2 takes as
        position_encodings); None: the scheme adds none."""
        return None

    def initialise(self, embedding_std: float) -> None:
        """Draw the scheme's parameters, if any, for embeddings drawn with this standard
        deviation (t2.model.init)."""


def relative_positions(
    n_queries: int, n_keys: int, offset: int, device: torch.device
) -> torch.Tensor:
    """j - i of keys j = 0 .. Tk-1 and queries i = offset .. offset+Tq-1: (Tq, Tk) integers."""
    queries = torch.arange(offset, offset + n_queries, device=device)
    return torch.arange(n_keys, device=device)[None, :] - queries[:, None]


class PerShape(Generic[T]):
    """The last value a scheme made for a key (a shape, an offset, a device), made again for
    another key: every self-attention layer of a forward pass asks for the same one. None
    is kept while compiling (the compiler shares it by itself)."""

    def __init__(self) -> None:
        self._last: tuple[Hashable, T] | None = None

    def get(self, key: Hashable, make: Callable[[], T]) -> T:
        if torch.compiler.is_compiling():
            return make()
        if self._last is None or self._last[0] != key:
            self._last = (key, make())
        return self._last[1]


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


def build_layer_part(
    name: str, scheme: Positional, causal: bool, d_head: int, n_heads: int
) -> nn.Module | None:
    """A self-attention layer's part of the scheme `name` (Positional.layer_part), if it
    has the parameters its facts declare."""
    part = scheme.layer_part(causal)
    declared = POSITIONAL.facts(name).layer_params(d_head, n_heads)
    as_declared(POSITIONAL, name, nn.Module() if part is None else part, declared)
    return part
