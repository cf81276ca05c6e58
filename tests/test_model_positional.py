"""Positional schemes against their formulas: sinusoidal closed form, RoPE's relative
property, learned positions' initialisation, ALiBi's, Shaw et al.'s and T5's relative
terms, and the shared no-op interface."""

from __future__ import annotations

import math

import pytest
import torch

from t2.errors import ConfigError
from t2.model.attention import SelfAttention
from t2.model.positional import build_positional
from t2.model.positional.alibi import alibi_slopes
from t2.model.positional.rope import rope_tables
from t2.model.positional.sinusoidal import sinusoid_table
from t2.model.positional.t5 import t5_buckets
from t2.model.summary import count_parameters
from t2.model.transformer import Transformer
from t2.registry import POSITIONAL

pytestmark = pytest.mark.usefixtures("single_thread")


def test_sinusoid_table_equals_closed_form():
    n, d = 40, 12
    table = sinusoid_table(n, d).double()
    for t in range(n):
        for i in range(d // 2):
            angle = t / 10000 ** (2 * i / d)
            assert table[t, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[t, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_sinusoidal_embed_adds_table_at_offset_and_grows_beyond_it():
    pos = build_positional("sinusoidal", 8, 4, max_positions=16, base=10000.0)
    x = torch.randn(2, 5, 8)
    # positions 14..18 run past the 16-row table: it grows and stays the closed form
    out = pos.embed(x, offset=14)
    torch.testing.assert_close(out - x, sinusoid_table(19, 8)[14:19].expand(2, 5, 8))
    torch.testing.assert_close(pos.rotate(x[:, None]), x[:, None])  # additive: no rotation


def _rope(d_head=8, max_positions=8):
    return build_positional("rope", 4 * d_head, d_head, max_positions, base=10000.0)


def test_rope_query_key_product_depends_only_on_offset():
    torch.manual_seed(0)
    rope = _rope().double()
    q, k = (
        torch.randn(1, 1, 1, 8, dtype=torch.float64),
        torch.randn(1, 1, 1, 8, dtype=torch.float64),
    )

    def score(i: int, j: int) -> float:  # q at position i, k at position j
        return (rope.rotate(q, offset=i) * rope.rotate(k, offset=j)).sum().item()

    for delta in (0, 1, 3, 7):
        scores = [score(j + delta, j) for j in (0, 2, 5, 20)]  # 20+: beyond the table
        assert scores == pytest.approx([scores[0]] * 4, abs=1e-6)
    assert score(3, 0) != pytest.approx(score(0, 0), abs=1e-3)  # and it does depend on it


def test_rope_rotates_pairs_by_position_times_frequency():
    rope = _rope(d_head=4).double()
    x = torch.randn(1, 1, 6, 4, dtype=torch.float64)
    out = rope.rotate(x)
    for t in range(6):
        for i in range(2):  # pair (i, i + d/2) rotated by angle t * base^(-2i/d)
            a = t * 10000.0 ** (-2 * i / 4)
            x1, x2 = x[0, 0, t, i].item(), x[0, 0, t, i + 2].item()
            assert out[0, 0, t, i].item() == pytest.approx(x1 * math.cos(a) - x2 * math.sin(a))
            assert out[0, 0, t, i + 2].item() == pytest.approx(x2 * math.cos(a) + x1 * math.sin(a))


def test_rope_tables_shape_and_halves():
    cos, sin = rope_tables(10, 6, 10000.0)
    assert cos.shape == sin.shape == (10, 6)
    torch.testing.assert_close(cos[:, :3], cos[:, 3:])
    torch.testing.assert_close(cos**2 + sin**2, torch.ones(10, 6))


def test_rope_needs_even_head_size():
    with pytest.raises(ConfigError, match="even head size"):
        build_positional("rope", 6, 3, 8, 10000.0)


def test_learned_positions_raise_past_the_table():
    pos = build_positional("learned", 8, 4, max_positions=6, base=10000.0)
    pos.embed(torch.zeros(1, 6, 8))
    with pytest.raises(ConfigError, match="max_positions"):
        pos.embed(torch.zeros(1, 3, 8), offset=4)


@pytest.mark.parametrize("name", POSITIONAL.names())
def test_every_scheme_is_identity_where_it_does_not_apply(name):
    pos = build_positional(name, 16, 8, 32, 10000.0)
    x, q = torch.randn(2, 5, 16), torch.randn(2, 2, 5, 8)
    part = pos.layer_part(causal=False)
    changed_embed = not torch.equal(pos.embed(x, 3), x)
    changed_rotate = not torch.equal(pos.rotate(q, 3), q)
    biased = pos.attention_bias(q, 5, 0, part) is not None
    valued = pos.attention_values(5, 5, 0, part) is not None
    assert sum((changed_embed, changed_rotate, biased or valued)) <= 1  # one place of action
    assert valued == POSITIONAL.facts(name).weights  # a term of the weights is in the facts
    known = {"none": (False, False, False, False), "rope": (False, True, False, False)}
    known |= {"sinusoidal": (True, False, False, False), "learned": (True, False, False, False)}
    known |= {"alibi": (False, False, True, False), "t5": (False, False, True, False)}
    known |= {"relative": (False, False, True, True)}
    # a new scheme says where it acts
    assert (changed_embed, changed_rotate, biased, valued) == known[name]


@pytest.mark.parametrize("name", POSITIONAL.names())
def test_every_scheme_says_how_long_a_sequence_it_encodes(name):
    """Decoding asks the scheme, never its name: a fixed table has a length, others grow."""
    pos = build_positional(name, 16, 8, 12, 10000.0)
    if pos.max_length is None:  # the scheme must then encode a sequence beyond 12 positions
        x = torch.zeros(1, 30, 16)
        assert pos.embed(x).shape == x.shape and pos.rotate(x.view(1, 2, 30, 8)).shape[2] == 30
    else:
        assert pos.max_length == 12
        with pytest.raises(ConfigError, match="raise model.max_positions"):
            pos.embed(torch.zeros(1, 13, 16))
    assert (pos.max_length is not None) == (name == "learned")


def _queries(n: int, heads: int = 4, d_head: int = 8, seed: int = 0) -> torch.Tensor:
    """Queries (2, H, n, Dh)."""
    return torch.randn(2, heads, n, d_head, generator=torch.Generator().manual_seed(seed))


def test_alibi_slopes_are_the_papers():
    """Press et al. 2022: 8 heads give 1/2, 1/4, ..., 1/256; 6 heads take 4's slopes, then
    every other one of 8's (the authors' rule for head counts that are not powers of 2)."""
    assert alibi_slopes(8) == [2.0**-i for i in range(1, 9)]
    assert alibi_slopes(4) == [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8]
    assert alibi_slopes(6) == alibi_slopes(4) + [2.0**-1, 2.0**-3]


def test_alibi_bias_is_minus_slope_times_distance_at_any_offset():
    pos = build_positional("alibi", 32, 8, 16, 10000.0)  # 4 heads
    slopes = torch.tensor(alibi_slopes(4))
    full = pos.attention_bias(_queries(6), 6, 0)
    assert full.shape == (1, 4, 6, 6)
    for h, i, j in ((0, 5, 1), (3, 2, 4), (1, 3, 3)):
        assert full[0, h, i, j].item() == pytest.approx(-slopes[h].item() * abs(i - j))
    # one decoding step at position 5 over 6 cached keys: the last row of the full bias
    torch.testing.assert_close(pos.attention_bias(_queries(1), 6, 5), full[:, :, 5:])
    # no table: any length
    assert pos.max_length is None and pos.attention_bias(_queries(1), 500, 499).shape[-1] == 500


def test_rope_casts_its_tables_once_per_dtype_not_per_layer_call():
    rope = build_positional("rope", 32, 8, 16, 10000.0)
    first = rope.tables(0, 5, torch.bfloat16)
    again = rope.tables(2, 7, torch.bfloat16)
    assert first[0].untyped_storage().data_ptr() == again[0].untyped_storage().data_ptr()
    torch.testing.assert_close(again[0], rope.cos[2:7].to(torch.bfloat16), rtol=0, atol=0)
    grown = rope.tables(30, 40, torch.bfloat16)  # past the table: grown, cast anew
    cos, sin = rope_tables(80, 8, 10000.0)
    torch.testing.assert_close(grown[1], sin[30:40].to(torch.bfloat16), rtol=0, atol=0)


def test_alibi_builds_its_bias_once_per_shape():
    alibi = build_positional("alibi", 32, 8, 16, 10000.0)
    bias = alibi.attention_bias(_queries(4), 6, 0)
    assert alibi.attention_bias(_queries(4), 6, 0) is bias
    other = alibi.attention_bias(_queries(1), 6, 5)
    assert other is not bias
    distance = (torch.arange(5, 6)[:, None] - torch.arange(6)[None, :]).abs().float()
    torch.testing.assert_close(other, (-alibi.slopes * distance)[None])


def _attention(scheme: str, causal: bool) -> tuple:
    """A scheme (4 heads of 8) and a float64 self-attention layer with its part."""
    torch.manual_seed(0)
    pos = build_positional(scheme, 32, 8, 64, 10000.0).double()
    attn = SelfAttention(32, 4, 0.0, True, "sdpa", positions=pos.layer_part(causal))
    return pos, attn.double().eval()


def _paper_heads(attn, x: torch.Tensor) -> list[torch.Tensor]:
    """x W^Q, x W^K and x W^V of each head, (B, H, T, Dh)."""
    weights, biases = attn.qkv.weight.chunk(3), attn.qkv.bias.chunk(3)
    return [
        (x @ w.T + b).unflatten(-1, (4, 8)).transpose(1, 2)
        for w, b in zip(weights, biases, strict=True)
    ]


def _output(attn, scores: torch.Tensor, values: torch.Tensor, causal: bool) -> torch.Tensor:
    """softmax over keys of scores (B, H, T, T), causal if asked, times values (B, H, T,
    T, Dh) of each query and key, through the output projection."""
    if causal:
        scores = scores.masked_fill(torch.ones(40, 40).triu(1).bool(), float("-inf"))
    z = (scores.softmax(-1)[..., None] * values).sum(-2)  # (B, H, T, Dh)
    return attn.out_proj(z.transpose(1, 2).flatten(2))


@pytest.mark.parametrize("causal", [False, True])
def test_relative_positions_are_shaws_formula(causal):
    """Shaw et al. 2018, eqs. 3-5: e_ij = x_i W^Q (x_j W^K + a^K_ij)^T / sqrt(d_z) and
    z_i = sum_j alpha_ij (x_j W^V + a^V_ij), with a_ij = w[clip(j - i, -k, k)], k = 16;
    over 40 positions, so that the distances past k are clipped."""
    pos, attn = _attention("relative", causal)
    x = torch.randn(2, 40, 32, dtype=torch.float64)
    q, k, v = _paper_heads(attn, x)
    i, j = torch.arange(40)[:, None], torch.arange(40)[None, :]
    clipped = (j - i).clamp(-16, 16) + 16  # the row of w^K and w^V of each (i, j)
    a_k, a_v = attn.positions.keys[clipped], attn.positions.values[clipped]  # (T, T, Dh)
    scores = (q[:, :, :, None, :] * (k[:, :, None] + a_k)).sum(-1) / math.sqrt(8)
    want = _output(attn, scores, v[:, :, None] + a_v, causal)
    torch.testing.assert_close(attn(x, None, causal, pos), want)


def test_t5_buckets_are_t5s():
    """T5's buckets of j - i (Raffel et al. 2020; its code): bidirectional, 16 a side (keys
    after the query from 16), one each under 8, then 8 + floor(8 log(d/8) / log(16)) up to
    15; causal, 32 for i - j >= 0, one each under 16, then 16 + floor(16 log(d/16) / log(8))."""
    both = {0: 0, -1: 1, -7: 7, -8: 8, -11: 8, -12: 9, -16: 10, -32: 12, -64: 14, -127: 15}
    both |= {-128: 15, -5000: 15, 1: 17, 7: 23, 8: 24, 16: 26, 128: 31, 5000: 31}
    back = {0: 0, -15: 15, -16: 16, -20: 17, -32: 21, -64: 26, -127: 31, -128: 31, 3: 0}
    for table, bidirectional in ((both, True), (back, False)):
        relative = torch.tensor(list(table))
        assert t5_buckets(relative, bidirectional).tolist() == list(table.values())


@pytest.mark.parametrize("causal", [False, True])
def test_t5_bias_is_a_scalar_per_head_and_bucket_added_to_the_scores(causal):
    """score_ij = q_i k_j / sqrt(Dh) + b[bucket(j - i), h] (T5's bias after t2's scaling)."""
    pos, attn = _attention("t5", causal)
    x = torch.randn(2, 40, 32, dtype=torch.float64)
    q, k, v = _paper_heads(attn, x)
    buckets = t5_buckets(torch.arange(40)[None, :] - torch.arange(40)[:, None], not causal)
    bias = attn.positions.weight[buckets].permute(2, 0, 1)  # (H, T, T)
    scores = q @ k.transpose(-1, -2) / math.sqrt(8) + bias
    want = _output(attn, scores, v[:, :, None].expand(-1, -1, 40, -1, -1), causal)
    torch.testing.assert_close(attn(x, None, causal, pos), want)


def test_t5_shares_a_stacks_table_and_shaw_keeps_one_per_layer(tiny_model_config):
    """T5 computes its bias in a stack's first layer for all of them (one table a stack);
    Shaw et al.'s tables are each layer's own."""
    cfg = tiny_model_config(positional="t5", n_encoder_layers=2, n_decoder_layers=2)
    t5 = Transformer(cfg)
    parts = [[layer.self_attn.positions for layer in stack] for stack in (t5.encoder, t5.decoder)]
    assert parts[0][0] is parts[0][1] and parts[1][0] is parts[1][1]
    assert parts[0][0] is not parts[1][0] and not parts[0][0].causal and parts[1][0].causal
    sinusoidal = Transformer(tiny_model_config(n_encoder_layers=2, n_decoder_layers=2))
    assert count_parameters(t5)["total"] - count_parameters(sinusoidal)["total"] == 2 * 32 * 2
    shaw = Transformer(tiny_model_config(positional="relative", n_encoder_layers=2))
    tables = {id(layer.self_attn.positions) for layer in (*shaw.encoder, *shaw.decoder)}
    assert len(tables) == 3
