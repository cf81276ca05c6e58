"""The documented FLOP formula (t2/model/flops.py) against torch's count of the matmuls the
model really runs, at a tiny size, for every feed-forward and positional scheme. The
attention kernel is "math" (explicit matmuls): torch's counter does not see inside the CPU
SDPA kernel, which computes the same products."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from t2.model.flops import flops_per_token, forward_flops, training_flops
from t2.model.positional import Positional
from t2.model.summary import estimate_memory
from t2.model.transformer import Transformer
from t2.registry import FFN, NORM, POSITIONAL, RESIDUAL

pytestmark = pytest.mark.usefixtures("single_thread")


def counted(model: Transformer, src: torch.Tensor, tgt: torch.Tensor, backward: bool) -> int:
    with FlopCounterMode(display=False) as counter:
        logits = model(src, tgt)
        if backward:
            logits.float().square().mean().backward()
    return counter.get_total_flops()


@pytest.mark.parametrize("ffn", FFN.names())
@pytest.mark.parametrize("positional", POSITIONAL.names())
def test_forward_flops_equal_the_counted_matmuls(tiny_model_config, ffn, positional):
    """Key/value heads (all, multi-query, 2 of 4) and QK-norm vary along the sweep."""
    torch.manual_seed(0)
    i = POSITIONAL.names().index(positional) + FFN.names().index(ffn)
    cfg = tiny_model_config(
        d_model=32,
        n_heads=4,
        d_ff=96,
        ffn=ffn,
        positional=positional,
        n_encoder_layers=2,
        n_decoder_layers=3,
        vocab_size=50,
        attention="math",
        n_kv_heads=(0, 1, 2)[i % 3],
        qk_norm=i % 2 == 1,
    )
    model = Transformer(cfg).eval()
    s, t, batch = 7, 5, 3
    src, tgt = torch.randint(3, 50, (batch, s)), torch.randint(3, 50, (batch, t))
    assert counted(model, src, tgt, backward=False) == batch * forward_flops(cfg, s, t)


@pytest.mark.parametrize("residual", RESIDUAL.names())
def test_forward_flops_equal_the_counted_matmuls_with_every_residual(tiny_model_config, residual):
    """ScaleNorm and the built-in connections are elementwise: no matmul to count."""
    torch.manual_seed(0)
    cfg = tiny_model_config(
        d_model=32, n_heads=4, d_ff=64, n_encoder_layers=2, n_decoder_layers=2, vocab_size=40
    )
    cfg = replace(cfg, residual=residual, norm="scalenorm", attention="math")
    model = Transformer(cfg).eval()
    src, tgt = torch.randint(3, 40, (2, 6)), torch.randint(3, 40, (2, 4))
    assert counted(model, src, tgt, backward=False) == 2 * forward_flops(cfg, 6, 4)


def test_training_flops_are_three_forward_passes(tiny_model_config):
    torch.manual_seed(0)
    cfg = tiny_model_config(
        d_model=32, n_heads=4, d_ff=64, vocab_size=40, dropout=0.0, attention="math"
    )
    model = Transformer(cfg).train()
    src, tgt = torch.randint(3, 40, (2, 6)), torch.randint(3, 40, (2, 4))
    total = counted(model, src, tgt, backward=True)
    assert total == training_flops(cfg, [6, 6], [4, 4]) == 3 * 2 * forward_flops(cfg, 6, 4)


def test_flops_per_token_of_the_base_model_by_hand():
    """base: d 512, f 2048, 6+6 layers, V 37000; at s = t = 32 (hand arithmetic below)."""
    from t2.recipes import load_config

    cfg = load_config("base").model
    d, f, V, n = 512, 2048, cfg.vocab_size, 32  # noqa: N806
    encoder = 6 * (8 * n * d * d + 4 * n * n * d + 4 * n * d * f)
    decoder = 6 * (12 * n * d * d + 4 * n * n * d + 4 * n * d * d + 4 * n * n * d + 4 * n * d * f)
    assert flops_per_token(cfg, n, n) == 3 * (encoder + decoder + 2 * n * d * V) / (2 * n)


def test_a_positional_schemes_own_terms_count_once_per_self_attention_layer(
    tiny_model_config, monkeypatch
):
    """The FLOPs and the memory model add a scheme's facts' terms (Shaw's relative
    positions have some) for each encoder and decoder self-attention layer."""
    monkeypatch.setattr(POSITIONAL, "_entries", dict(POSITIONAL._entries))
    none = POSITIONAL.facts("none")
    facts = replace(none, flops=lambda s_q, s_k, d: 1000 * s_q * s_k, saved=lambda q, k, h: 7 * q)
    POSITIONAL.register("probe_positional", facts)(type("Probe", (Positional,), {}))
    plain = tiny_model_config(positional="none", n_encoder_layers=2, n_decoder_layers=3)
    probe = replace(plain, positional="probe_positional")
    s, t = 6, 4
    assert forward_flops(probe, s, t) - forward_flops(plain, s, t) == 1000 * (2 * s * s + 3 * t * t)
    a, b = (estimate_memory(c, 0, 40, 8, mixed=False).activations for c in (probe, plain))
    assert a - b == 4 * (2 + 3) * 7 * 8 * (40 // 8)  # float32: 7 elements a query, 5 sequences


def test_a_residual_connections_terms_count_once_per_sublayer(tiny_model_config, monkeypatch):
    """Two sublayers an encoder layer, three a decoder layer; a connection whose facts drop
    the norm drops the norm's memory term too."""
    monkeypatch.setattr(RESIDUAL, "_entries", dict(RESIDUAL._entries))
    plain = RESIDUAL.facts("plain")
    facts = replace(plain, flops=lambda d: 100 * d, saved=lambda d: 3 * d, normed=False)
    RESIDUAL.register("probe_residual", facts)(type("Probe", (RESIDUAL.get("plain"),), {}))
    cfg = tiny_model_config(n_encoder_layers=2, n_decoder_layers=3)
    probe = replace(cfg, residual="probe_residual")
    s, t, d, sublayers = 6, 4, cfg.d_model, 2 * 2 + 3 * 3
    assert forward_flops(probe, s, t) - forward_flops(cfg, s, t) == 100 * d * (
        2 * 2 * s + 3 * 3 * t
    )
    a, b = (estimate_memory(c, 0, 40, 8, mixed=False).activations for c in (probe, cfg))
    per_token = 3 * d - NORM.facts("layernorm").saved(d)
    assert a - b == 4 * sublayers * per_token * 40  # float32, 5 sequences of 8 tokens
