"""Parameter counts against a hand-derived formula, tied matrices counted once; the memory
model's terms of the attention variants."""

from __future__ import annotations

from dataclasses import replace

import pytest

from t2.model.positional.relative import ROWS
from t2.model.summary import count_parameters, estimate_memory
from t2.model.transformer import Transformer

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.mark.parametrize("placement, n_kv_heads, qk_norm", [("pre", 0, False), ("post", 1, True)])
def test_count_matches_formula(tiny_model_config, placement, n_kv_heads, qk_norm):
    cfg = tiny_model_config(
        d_model=16,
        d_ff=32,
        n_encoder_layers=2,
        n_decoder_layers=1,
        norm_position=placement,
        n_kv_heads=n_kv_heads,
        qk_norm=qk_norm,
    )
    D, F, V = 16, 32, 50  # noqa: N806
    C = 8 if n_kv_heads == 1 else 16  # noqa: N806  (the keys' width: 1 of 2 heads of 8)
    attention = 2 * D * D + 2 * D * C + 2 * D + 2 * C  # q, k, v, out, with biases
    qk = 2 * 2 * 8 if qk_norm else 0  # self-attention's two LayerNorms of a head
    ffn = 2 * D * F + F + D
    norm = 2 * D  # LayerNorm's gain and shift
    encoder = 2 * (attention + qk + ffn + 2 * norm) + (norm if placement == "pre" else 0)
    decoder = 1 * (2 * attention + qk + ffn + 3 * norm) + (norm if placement == "pre" else 0)
    counts = count_parameters(Transformer(cfg))
    assert counts == {
        "embeddings": V * D,
        "encoder": encoder,
        "decoder": decoder,
        "other": 0,
        "total": V * D + encoder + decoder,
    }


def test_memory_estimate_scales_with_tokens(tiny_model_config):
    cfg = tiny_model_config()
    small = estimate_memory(cfg, 1000, tokens_per_batch=256, seq_len=16, mixed=True)
    big = estimate_memory(cfg, 1000, tokens_per_batch=512, seq_len=16, mixed=True)
    fp32 = estimate_memory(cfg, 1000, tokens_per_batch=256, seq_len=16, mixed=False)
    assert (small.weights, small.gradients, small.optimizer) == (4000, 4000, 8000)
    assert 0 < small.activations < big.activations < 2.01 * small.activations
    assert small.activations < fp32.activations
    assert small.total == 16000 + small.activations


def test_memory_counts_key_value_heads_qk_norm_and_a_schemes_weights(tiny_model_config):
    """Per attention layer (2 encoder, 3 decoder: 8 in all) and token: keys and values at
    their width (multi-query: 8 of 32 each); QK-norm's LayerNorms keep their inputs (4 query
    and 4 key heads of 8, in the 5 self-attention layers); Shaw's self-attention keeps its
    (s x s) weights even where the kernel is fused (CUDA), and its rows' sums P (4 x 33)."""
    base = tiny_model_config(d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=3)
    s, b = 8, 5  # 40 tokens of 8 a sequence, float32 (4 bytes an element)

    def activations(cfg, device: str = "cpu") -> int:
        return estimate_memory(cfg, 0, s * b, s, mixed=False, device=device).activations

    per_layer = 4 * 8 * s * b  # bytes of one element a token, over the 8 attention layers
    assert activations(base) - activations(replace(base, n_kv_heads=1)) == 2 * 24 * per_layer
    self_layers = 4 * (2 + 3)  # bytes, over the self-attention layers
    qk_norm = activations(replace(base, qk_norm=True)) - activations(base)
    assert qk_norm == self_layers * (4 + 4) * 8 * s * b
    relative, plain = (replace(base, positional=p) for p in ("relative", "none"))
    weights = (2.5 * 4 * s * s - 2 * 4 * s) * b  # the weights kept instead of the fused lse
    extra = self_layers * (weights + 4 * s * ROWS * b)
    assert activations(relative, "cuda") - activations(plain, "cuda") == extra
    assert activations(relative) - activations(plain) == self_layers * 4 * s * ROWS * b
