"""Rotary position embedding, Su et al. 2021 (arXiv:2104.09864)."""

from __future__ import annotations

import torch

from t2.errors import ConfigError
from t2.facts import Ct2, PositionalFacts
from t2.model.config import ModelConfig
from t2.model.fused import rotary, rotate_qk
from t2.model.positional import Positional
from t2.registry import POSITIONAL


def rope_tables(n_positions: int, d_head: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of t * base^(-2i/Dh), repeated for both halves; shapes (T, Dh)."""
    inv_freq = base ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)
    angles = torch.arange(n_positions, dtype=torch.float64)[:, None] * inv_freq
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().float(), angles.sin().float()


def _base(cfg: ModelConfig) -> float:
    return cfg.rope_base


@POSITIONAL.register(
    "rope",
    PositionalFacts(
        order=True,
        summary="self-attention's queries and keys rotated by position",
        params=lambda d_model, max_positions: 0,
        # the whole head (rotary_dim 0) by halves, not interleaved, as t2 rotates; both
        # rotate self-attention only
        ct2=Ct2({"rotary_dim": 0, "rotary_interleave": False, "rotary_base": _base}),
    ),
)
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
