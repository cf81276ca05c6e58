"""Parameter counts against a hand-derived formula, tied matrices counted once."""

from __future__ import annotations

import pytest

from t2.model.summary import count_parameters, estimate_memory
from t2.model.transformer import Transformer

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.mark.parametrize("placement", ["pre", "post"])
def test_count_matches_formula(tiny_model_config, placement):
    cfg = tiny_model_config(
        d_model=16, d_ff=32, n_encoder_layers=2, n_decoder_layers=1, norm_position=placement
    )
    D, F, V = 16, 32, 50  # noqa: N806
    attention = 4 * D * D + 4 * D  # q, k, v and output projections with biases
    ffn = 2 * D * F + F + D
    norm = 2 * D  # LayerNorm's gain and shift
    encoder = 2 * (attention + ffn + 2 * norm) + (norm if placement == "pre" else 0)
    decoder = 1 * (2 * attention + ffn + 3 * norm) + (norm if placement == "pre" else 0)
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
