"""Encoder and decoder layers. Pre- vs post-norm is wiring, decided in one place: Residual,
which joins each sublayer to the stream with model.residual's connection."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from t2.errors import ConfigError
from t2.model.attention import CrossAttention, SelfAttention
from t2.model.config import ModelConfig
from t2.model.ffn import build_ffn
from t2.model.flex import BlockMasks
from t2.model.fused import Dropout
from t2.model.kvcache import KVCache
from t2.model.norm import build_norm
from t2.model.packing import Packing
from t2.model.positional import Positional, build_layer_part
from t2.model.residual import Connection, Depth, build_residual
from t2.registry import ATTENTION, POSITIONAL, RESIDUAL

Tensor = torch.Tensor


class Residual(nn.Module):
    """connection(x, dropout(f(x))) with the norm after it (post, Vaswani et al. 2017) or
    before the sublayer (pre, Xiong et al. 2020, arXiv:2002.04745). The connection is
    model.residual's (t2.model.residual): x + y for the paper's."""

    def __init__(self, norm: nn.Module, dropout: float, pre: bool, connection: Connection):
        super().__init__()
        self.norm = norm
        self.dropout = Dropout(dropout)
        self.pre = pre
        self.connection = connection

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        if self.pre:
            return self.connection(x, self.dropout(sublayer(self.norm(x))))
        return self.norm(self.connection(x, self.dropout(sublayer(x))))


def _residual(cfg: ModelConfig, decoder: bool) -> Residual:
    """A sublayer's wrapper; without a norm where the connection's facts say so (ReZero)."""
    depth = Depth(cfg.n_encoder_layers, cfg.n_decoder_layers, decoder)
    connection = build_residual(cfg.residual, cfg.d_model, depth, cfg.norm_position)
    normed = RESIDUAL.facts(cfg.residual).normed
    norm = build_norm(cfg.norm, cfg.d_model, cfg.norm_eps) if normed else nn.Identity()
    return Residual(norm, cfg.dropout, cfg.norm_position == "pre", connection)


def _attention(cfg: ModelConfig, qk_norm: bool) -> tuple:
    """What an attention layer is built with, positional parts aside; QK-norm's norm is
    model.norm's over one head (self-attention's with model.qk_norm: t2.model.attention)."""
    norm = (lambda: build_norm(cfg.norm, cfg.d_head, cfg.norm_eps)) if qk_norm else None
    return (
        cfg.d_model,
        cfg.n_heads,
        cfg.attention_dropout,
        cfg.bias,
        cfg.attention,
        cfg.n_kv_heads,
        norm,
    )


def _self_attention(cfg: ModelConfig, positional: Positional, causal: bool) -> SelfAttention:
    if POSITIONAL.facts(cfg.positional).weights and not ATTENTION.facts(cfg.attention).values:
        takes = [n for n in ATTENTION.names() if ATTENTION.facts(n).values]
        raise ConfigError(
            f"model.positional={cfg.positional!r} adds a term of the attention probabilities "
            f"that model.attention={cfg.attention!r} cannot take (its facts); choose one of "
            f"{', '.join(takes)}"
        )
    part = build_layer_part(cfg.positional, positional, causal, cfg.d_head, cfg.n_heads)
    return SelfAttention(*_attention(cfg, cfg.qk_norm), part)


def _feed_forward(cfg: ModelConfig) -> nn.Module:
    return build_ffn(cfg.ffn, cfg.d_model, cfg.d_ff, cfg.ffn_dropout, cfg.bias)


class Layer(nn.Module):
    """A layer of either stack: its sublayers, each in a residual wrapper."""

    def sublayers(self) -> list[tuple[Residual, nn.Module]]:
        """(wrapper, sublayer) in the order the stream passes them."""
        raise NotImplementedError


class EncoderLayer(Layer):
    """Self-attention then feed-forward, each in a residual sublayer."""

    def __init__(self, cfg: ModelConfig, positional: Positional) -> None:
        super().__init__()
        self.self_attn = _self_attention(cfg, positional, causal=False)
        self.ffn = _feed_forward(cfg)
        self.res_attn, self.res_ffn = _residual(cfg, False), _residual(cfg, False)

    def sublayers(self) -> list[tuple[Residual, nn.Module]]:
        return [(self.res_attn, self.self_attn), (self.res_ffn, self.ffn)]

    def forward(
        self,
        x: Tensor,  # (B, S, D), or (N, D) with its packing
        src_pad: Tensor | None,
        positional: Positional,
        packing: Packing | None = None,
        masks: BlockMasks | None = None,  # the forward pass's (t2.model.flex)
    ) -> Tensor:
        x = self.res_attn(
            x,
            lambda h: self.self_attn(h, src_pad, False, positional, packing=packing, masks=masks),
        )
        return self.res_ffn(x, self.ffn)


class DecoderLayer(Layer):
    """Causal self-attention, cross-attention over the source, then feed-forward."""

    def __init__(self, cfg: ModelConfig, positional: Positional) -> None:
        super().__init__()
        self.self_attn = _self_attention(cfg, positional, causal=True)
        self.ffn = _feed_forward(cfg)
        self.cross_attn = CrossAttention(*_attention(cfg, qk_norm=False))
        self.res_self, self.res_cross = _residual(cfg, True), _residual(cfg, True)
        self.res_ffn = _residual(cfg, True)

    def sublayers(self) -> list[tuple[Residual, nn.Module]]:
        return [
            (self.res_self, self.self_attn),
            (self.res_cross, self.cross_attn),
            (self.res_ffn, self.ffn),
        ]

    def forward(
        self,
        x: Tensor,  # (B, T, D)
        memory: Tensor,  # (B, S, D)
        src_pad: Tensor | None,
        positional: Positional,
        self_cache: KVCache | None = None,
        cross_cache: KVCache | None = None,
        offset: int = 0,
        packing: Packing | None = None,  # x's, when it comes packed (N, D)
        memory_packing: Packing | None = None,  # memory's
        masks: BlockMasks | None = None,  # the forward pass's (t2.model.flex)
    ) -> Tensor:
        x = self.res_self(
            x,
            lambda h: self.self_attn(
                h, None, True, positional, self_cache, offset, packing, masks=masks
            ),
        )
        x = self.res_cross(
            x,
            lambda h: self.cross_attn(
                h, memory, src_pad, cross_cache, packing, memory_packing, masks=masks
            ),
        )
        return self.res_ffn(x, self.ffn)
