"""Matrix-multiplication FLOPs of an encoder-decoder (docs/performance.md, "FLOPs").

A multiply-add is 2 FLOPs; a matmul of (m x k) by (k x n) costs 2mkn. For one sentence pair
with s source and t target tokens, width d, keys and values of width c = ModelConfig.d_kv
(d, or the key/value heads' share of it: model.n_kv_heads), feed-forward size f (a gated
one: three matrices of hidden size h = ModelConfig.d_hidden, 2/3 f, instead of two of f)
and vocabulary V, with the feed-forward's term, the positional scheme's (Shaw's relative
positions: 4 s (2k + 1) d; none for the others) and the residual connection's (none for
the built-in connections: theirs is elementwise) taken from each component's
facts (t2.facts):

  encoder layer   self q, out; k, v        4 s d^2 + 4 s d c
                  scores QK^T and A V      4 s^2 d   (+ the positional scheme's)
                  feed-forward             4 s d f   (gated: 6 s d h)
                  2 residual connections   (the connection's)
  decoder layer   self q, out; k, v        4 t d^2 + 4 t d c
                  self scores and A V      4 t^2 d   (+ the positional scheme's)
                  cross q and out          4 t d^2
                  cross k and v            4 s d c   (the source's memory, once per layer)
                  cross scores and A V     4 t s d
                  feed-forward             4 t d f   (gated: 6 t d h)
                  3 residual connections   (the connection's)
  output projection                        2 t d V

Training costs 3x the forward pass: the backward of each matmul is two matmuls of the same
size (the gradients of both operands). Embedding lookups, norms, softmax, activations, RoPE
and the loss are elementwise or gathers and not counted (under 1% at these sizes), as in
Kaplan et al. 2020 and PaLM's MFU; so are QK-norm's norms and T5's bias (a gather). Every
query head scores its keys, so grouped keys leave the scores' term as it is. Attention is
counted over the whole square (a causal decoder computes it whole with SDPA's mask), over
the real tokens of each sentence.
"""

from __future__ import annotations

from collections.abc import Sequence

from t2.model.config import ModelConfig
from t2.registry import FFN, POSITIONAL, RESIDUAL


def _ffn_flops(cfg: ModelConfig, n: int) -> int:
    return n * FFN.facts(cfg.ffn).flops(cfg.d_model, cfg.d_ff)


def _positions_flops(cfg: ModelConfig, n: int) -> int:
    """The positional scheme's own matmuls in a self-attention layer over n tokens."""
    return POSITIONAL.facts(cfg.positional).flops(n, n, cfg.d_model)


def _residual_flops(cfg: ModelConfig, n: int) -> int:
    """A residual connection's own matmuls in one sublayer over n tokens."""
    return n * RESIDUAL.facts(cfg.residual).flops(cfg.d_model)


def forward_flops(cfg: ModelConfig, s: int, t: int) -> int:
    """Forward matmul FLOPs of one pair with s source and t target tokens (t2's shapes:
    the target counts BOS + tokens, the decoder input)."""
    d, c, V = cfg.d_model, cfg.d_kv, cfg.vocab_size  # noqa: N806
    encoder = (
        4 * s * d * d
        + 4 * s * d * c
        + 4 * s * s * d
        + _positions_flops(cfg, s)
        + _ffn_flops(cfg, s)
        + 2 * _residual_flops(cfg, s)
    )
    decoder = (
        4 * t * d * d
        + 4 * t * d * c
        + 4 * t * t * d
        + _positions_flops(cfg, t)
        + 4 * t * d * d
        + 4 * s * d * c
        + 4 * t * s * d
        + _ffn_flops(cfg, t)
        + 3 * _residual_flops(cfg, t)
    )
    return cfg.n_encoder_layers * encoder + cfg.n_decoder_layers * decoder + 2 * t * d * V


def training_flops(cfg: ModelConfig, src_lengths: Sequence[int], tgt_lengths: Sequence[int]) -> int:
    """FLOPs of one training step (forward and backward) over a batch of pairs."""
    pairs = zip(src_lengths, tgt_lengths, strict=True)
    return 3 * sum(forward_flops(cfg, s, t) for s, t in pairs)


def flops_per_token(cfg: ModelConfig, s: int, t: int) -> float:
    """Training FLOPs per source+target token for pairs of s and t tokens."""
    return 3 * forward_flops(cfg, s, t) / (s + t)
