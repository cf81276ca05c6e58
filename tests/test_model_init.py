"""Initialisations of report 002: N(0, 1/d_model) embeddings, learned positions at half
the embedding variance, Xavier per fused block, tied W_Q = W_K, zeroed output projections."""

from __future__ import annotations

import math

import pytest
import torch

from t2.model.attention import CrossAttention, SelfAttention
from t2.model.transformer import Transformer

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.mark.parametrize(
    "embedding_init, variance", [("normal", 1 / 64), ("unit", 1.0), ("small", 0.02**2)]
)
def test_embedding_and_learned_position_variances(tiny_model_config, embedding_init, variance):
    torch.manual_seed(0)
    cfg = tiny_model_config(
        vocab_size=2000,
        d_model=64,
        n_heads=4,
        positional="learned",
        tie_embeddings="none",
        embedding_init=embedding_init,
    )
    model = Transformer(cfg)
    for w in (model.src_embed.weight[1:], model.tgt_embed.weight, model.output.weight):
        assert w.std().item() == pytest.approx(math.sqrt(variance), rel=0.02)  # 128k samples
        assert abs(w.mean().item()) < 0.01 * math.sqrt(variance)
    assert model.src_embed.weight[0].abs().sum() == 0  # the padding row starts at zero
    positions = model.positional.weight  # (1024, 64): half the embedding variance
    assert positions.std().item() == pytest.approx(math.sqrt(variance / 2), rel=0.02)


def test_xavier_bound_per_fused_block(tiny_model_config):
    torch.manual_seed(0)
    d, d_ff = 32, 128
    model = Transformer(tiny_model_config(d_model=d, n_heads=4, d_ff=d_ff))
    square = math.sqrt(6 / (d + d))  # Glorot uniform of one d x d block
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            fan_out, fan_in = module.weight.shape
            is_fused = fan_out in (2 * d, 3 * d) and fan_in == d
            bound = square if is_fused else math.sqrt(6 / (fan_in + fan_out))
            w = module.weight.abs()
            # uniform(-bound, bound): the largest of >= 1024 draws is within 1% of the bound
            assert w.max() <= bound and w.max() > 0.99 * bound, module
            assert module.bias is None or module.bias.abs().sum() == 0
    qkv = model.encoder[0].self_attn.qkv.weight
    assert all(block.abs().max() > 0.99 * square for block in qkv.chunk(3))


def test_small_init_draws_every_matrix_from_n_0_002(tiny_model_config):
    """init: small is transformers' N(0, 0.02) for every linear layer, biases at zero."""
    torch.manual_seed(0)
    model = Transformer(tiny_model_config(d_model=64, n_heads=4, d_ff=256, init="small"))
    weights = [m.weight.flatten() for m in model.modules() if isinstance(m, torch.nn.Linear)]
    biases = [
        m.bias for m in model.modules() if isinstance(m, torch.nn.Linear) and m.bias is not None
    ]
    drawn = torch.cat(weights)
    assert drawn.std().item() == pytest.approx(0.02, rel=0.02) and abs(drawn.mean()) < 1e-3
    assert all(b.abs().sum() == 0 for b in biases) and biases


@pytest.mark.parametrize("init", ["xavier", "default", "small"])
def test_tie_qk_init_gives_equal_queries_and_keys(tiny_model_config, init):
    torch.manual_seed(0)
    model = Transformer(tiny_model_config(tie_qk_init=True, init=init)).eval()
    x = torch.randn(2, 3, 16)
    n_checked = 0
    for module in model.modules():
        if isinstance(module, SelfAttention):
            q, k, v = module.qkv(x).chunk(3, dim=-1)
        elif isinstance(module, CrossAttention):
            q, (k, v) = module.q(x), module.kv(x).chunk(2, dim=-1)
        else:
            continue
        torch.testing.assert_close(q, k, rtol=0, atol=0)  # same projection, bias included
        assert not torch.allclose(q, v)  # only W_Q and W_K
        n_checked += 1
    assert n_checked == 3  # encoder self, decoder self and cross attention
    untied = Transformer(tiny_model_config(init=init)).encoder[0].self_attn.qkv.weight
    assert not torch.equal(*untied.chunk(3)[:2])


def test_zero_init_output_zeroes_attention_and_ffn_outputs(tiny_model_config):
    torch.manual_seed(0)
    for ffn in ("relu", "swiglu"):
        model = Transformer(tiny_model_config(zero_init_output=True, ffn=ffn))
        zeroed = {n for n, p in model.named_parameters() if p.dim() == 2 and not p.any()}
        expected = {
            n for n, _ in model.named_parameters() if n.endswith(("out_proj.weight", "w2.weight"))
        }
        assert zeroed == expected and len(expected) == 3 + 2  # 3 attentions, 2 FFNs
        plain = Transformer(tiny_model_config(ffn=ffn))
        assert all(p.any() for p in plain.parameters() if p.dim() == 2)
