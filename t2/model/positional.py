"""Positional schemes behind one interface.

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

import math

import torch
from torch import nn

from t2.errors import ConfigError
from t2.model.fused import rotary, rotate_qk
from t2.registry import POSITIONAL


class Positional(nn.Module):
    """The shared interface: both methods are the identity unless a scheme overrides one."""

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


@POSITIONAL.register("none")
class NoPositional(Positional):
    """No positional information (a bag-of-tokens ablation)."""


def sinusoid_table(n_positions: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """PE[t, 2i] = sin(t / base^(2i/d)), PE[t, 2i+1] = cos(t / base^(2i/d)); shape (T, D)."""
    position = torch.arange(n_positions, dtype=torch.float64)[:, None]
    inv_freq = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    table = torch.zeros(n_positions, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq[: d_model // 2])
    return table.float()


@POSITIONAL.register("sinusoidal")
class SinusoidalPositional(Positional):
    """Fixed sinusoids added to the embeddings, Vaswani et al. 2017 section 3.5."""

    def __init__(self, d_model: int, d_head: int, max_positions: int, base: float) -> None:
        super().__init__(d_model, d_head, max_positions, base)
        self.d_model, self.base = d_model, base
        self.register_buffer("table", sinusoid_table(max_positions, d_model, base), False)

    def embed(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        end = offset + x.shape[1]
        if end > self.table.shape[0]:  # sinusoids extrapolate: grow the table on demand
            self.table = sinusoid_table(2 * end, self.d_model, self.base).to(x.device)
        return x + self.table[offset:end].to(x.dtype)


@POSITIONAL.register("learned")
class LearnedPositional(Positional):
    """Absolute learned position embeddings (Gehring et al. 2017), added to the embeddings."""

    def __init__(self, d_model: int, d_head: int, max_positions: int, base: float) -> None:
        super().__init__(d_model, d_head, max_positions, base)
        self.weight = nn.Parameter(torch.empty(max_positions, d_model))
        # N(0, half the embedding variance), report 002: embeddings are N(0, 1/d_model);
        # initialise() redraws it to follow model.embedding_init.
        nn.init.normal_(self.weight, std=math.sqrt(0.5 / d_model))

    @property
    def max_length(self) -> int:
        return self.weight.shape[0]

    def embed(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        end = offset + x.shape[1]
        if end > self.weight.shape[0]:
            raise ConfigError(
                f"sequence of {end} positions exceeds model.max_positions="
                f"{self.weight.shape[0]} of learned positions; raise model.max_positions"
            )
        return x + self.weight[offset:end].to(x.dtype)


def rope_tables(n_positions: int, d_head: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of t * base^(-2i/Dh), repeated for both halves; shapes (T, Dh)."""
    inv_freq = base ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)
    angles = torch.arange(n_positions, dtype=torch.float64)[:, None] * inv_freq
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().float(), angles.sin().float()


@POSITIONAL.register("rope")
class RotaryPositional(Positional):
    """Rotary position embedding, Su et al. 2021 (arXiv:2104.09864), on self-attention q, k."""

    def __init__(self, d_model: int, d_head: int, max_positions: int, base: float) -> None:
        super().__init__(d_model, d_head, max_positions, base)
        if d_head % 2:
            raise ConfigError(f"rope needs an even head size, got {d_head}; change n_heads")
        self.d_head, self.base = d_head, base
        cos, sin = rope_tables(max_positions, d_head, base)
        self.register_buffer("cos", cos, False)
        self.register_buffer("sin", sin, False)
        # the tables in the activations' dtype, made once (not by every layer at every
        # call): (the float32 table they were cast from, cos, sin) per dtype
        self._cast: dict[torch.dtype, tuple[torch.Tensor, ...]] = {}

    def tables(self, offset: int, end: int, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
        """cos and sin (T, Dh) of positions offset .. end-1, grown on demand."""
        if end > self.cos.shape[0]:
            cos, sin = rope_tables(2 * end, self.d_head, self.base)
            self.cos, self.sin = cos.to(self.cos.device), sin.to(self.sin.device)
        if torch.compiler.is_compiling():  # the compiler hoists and fuses the cast itself
            return self.cos[offset:end].to(dtype), self.sin[offset:end].to(dtype)
        cast = self._cast.get(dtype)
        if cast is None or cast[0] is not self.cos:  # new, grown or moved tables
            cast = self._cast[dtype] = (self.cos, self.cos.to(dtype), self.sin.to(dtype))
        return cast[1][offset:end], cast[2][offset:end]

    def rotate(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        return rotary(x, *self.tables(offset, offset + x.shape[-2], x.dtype))

    def rotate_qkv(self, qkv: torch.Tensor, offset: int = 0) -> torch.Tensor:
        return rotate_qk(qkv, *self.tables(offset, offset + qkv.shape[-2], qkv.dtype))


def alibi_slopes(n_heads: int) -> list[float]:
    """The heads' slopes, a geometric sequence starting at 2^(-8/n) with that ratio (Press et
    al. 2022, section 3); for a head count that is not a power of two, those of the power
    below, then every other slope of the power above, as the authors' code does."""
    if n_heads & (n_heads - 1) == 0:
        start = 2.0 ** (-8.0 / n_heads)
        return [start ** (i + 1) for i in range(n_heads)]
    below = 1 << (n_heads.bit_length() - 1)
    return alibi_slopes(below) + alibi_slopes(2 * below)[0::2][: n_heads - below]


@POSITIONAL.register("alibi")
class AlibiPositional(Positional):
    """Attention with linear biases, Press et al. 2022 (arXiv:2108.12409): no position
    embeddings; head h adds -m_h * |i - j| to self-attention's score of query i and key j.
    In the decoder the causal mask leaves j <= i, the paper's -m_h * (i - j); the encoder
    sees keys on both sides, so the distance is symmetric. Extrapolates: no length limit."""

    def __init__(self, d_model: int, d_head: int, max_positions: int, base: float) -> None:
        super().__init__(d_model, d_head, max_positions, base)
        slopes = torch.tensor(alibi_slopes(d_model // d_head))
        self.register_buffer("slopes", slopes[:, None, None], False)  # (H, 1, 1)
        self._last: tuple[tuple, torch.Tensor] | None = None  # the last shape's bias

    def attention_bias(
        self, n_queries: int, n_keys: int, offset: int, device: torch.device
    ) -> torch.Tensor:
        """Built once per shape: every self-attention layer of a forward pass asks for the
        same one (the compiler shares it by itself)."""
        if torch.compiler.is_compiling():
            return self._bias(n_queries, n_keys, offset, device)
        key = (n_queries, n_keys, offset, device, self.slopes.data_ptr())
        if self._last is None or self._last[0] != key:
            self._last = (key, self._bias(n_queries, n_keys, offset, device))
        return self._last[1]

    def _bias(self, n_queries: int, n_keys: int, offset: int, device: torch.device) -> torch.Tensor:
        queries = torch.arange(offset, offset + n_queries, device=device)
        keys = torch.arange(n_keys, device=device)
        distance = (queries[:, None] - keys[None, :]).abs().float()  # (Tq, Tk)
        return (-self.slopes.to(device) * distance)[None]  # (1, H, Tq, Tk)


def build_positional(
    name: str, d_model: int, d_head: int, max_positions: int, base: float
) -> Positional:
    return POSITIONAL.get(name)(d_model, d_head, max_positions, base)
