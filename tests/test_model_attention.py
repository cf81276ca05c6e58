"""Attention layers: the KV cache, cached decoding against the full pass, grouped-query
attention and QK-norm against their formulas, a kernel's missing abilities."""

from __future__ import annotations

import pytest
import torch

import t2.model.attention as attention
from t2.errors import ConfigError
from t2.facts import KernelFacts
from t2.model.attention import CrossAttention, SelfAttention
from t2.model.kvcache import KVCache
from t2.model.norm import build_norm
from t2.model.positional import build_positional
from t2.model.transformer import Transformer
from t2.registry import ATTENTION

pytestmark = pytest.mark.usefixtures("single_thread")


def test_kv_cache_appends_grows_and_reorders():
    cache = KVCache()
    ks = [torch.randn(3, 2, t, 4) for t in (1, 20, 1)]  # the second step forces a regrowth
    for step in range(3):
        k, v = cache.append(ks[step], -ks[step])
        expected = torch.cat(ks[: step + 1], dim=-2)
        torch.testing.assert_close(k, expected)
        torch.testing.assert_close(v, -expected)
    assert cache.length == 22
    index = torch.tensor([2, 2, 0])
    cache.reorder(index)
    k, _ = cache.append(torch.zeros(3, 2, 1, 4), torch.zeros(3, 2, 1, 4))
    torch.testing.assert_close(k[:, :, :22], torch.cat(ks, dim=-2)[index])


def test_kv_cache_reorder_reuses_the_freed_buffers_while_decoding():
    """Beam search reorders every step at one batch size: the second reorder writes into
    the buffers the first one freed (no fresh allocation), and the rows are right."""
    cache = KVCache(capacity=12)  # a search that knows its length: no regrowth
    cache.append(torch.randn(3, 2, 5, 4), torch.randn(3, 2, 5, 4))
    first = cache.k.data_ptr()
    rows = cache.k[:, :, :5].clone()
    with torch.no_grad():
        cache.reorder(torch.tensor([1, 1, 2]))
        cache.reorder(torch.tensor([2, 0, 1]))
    assert cache.k.data_ptr() == first and cache.k.shape == (3, 2, 12, 4)
    torch.testing.assert_close(cache.k[:, :, :5], rows[[2, 1, 1]])
    with torch.no_grad():
        cache.reorder(torch.tensor([0, 2]))  # a sentence left: another size, new buffers
    torch.testing.assert_close(cache.k[:, :, :5], rows[[2, 1]])


def test_kv_cache_reorder_keeps_gradients():
    """With autograd on (a cache over a model in training mode), reorder copies through
    index_select, so gradients reach the rows kept."""
    k = torch.randn(3, 2, 4, 4, requires_grad=True)
    cache = KVCache()
    cache.append(k, k * 2)
    cache.reorder(torch.tensor([2, 2]))
    cache.k[:, :, :4].sum().backward()
    assert k.grad[2].eq(2).all() and k.grad[:2].eq(0).all()


def test_cross_attention_groups_query_rows_over_one_source():
    """g consecutive query rows (a sentence's beams) over one source row give what each
    would get over its own copy of the source, cached or not; other multiples fail."""
    torch.manual_seed(0)
    attn = CrossAttention(16, 2, 0.0, True, "sdpa").eval()
    memory, x = torch.randn(2, 5, 16), torch.randn(6, 1, 16)
    pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    copies = attn(x, memory.repeat_interleave(3, 0), pad.repeat_interleave(3, 0))
    torch.testing.assert_close(attn(x, memory, pad), copies, rtol=1e-6, atol=1e-6)
    cache = KVCache()
    attn(x, memory, pad, cache)
    assert cache.k.shape[0] == 2 and cache.k.is_contiguous()
    torch.testing.assert_close(attn(x, memory, pad, cache), copies, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="not a multiple"):
        attn(torch.randn(5, 1, 16), memory, pad)


@pytest.mark.parametrize(
    "positional, n_kv_heads, qk_norm",
    [
        ("none", 0, False),
        ("rope", 0, False),
        ("alibi", 0, False),
        ("relative", 1, False),
        ("t5", 0, True),
        ("rope", 1, True),
    ],
)
def test_self_attention_with_cache_equals_full_causal_pass(positional, n_kv_heads, qk_norm):
    """Every offset-dependent term and the key/value heads' cache, step by step."""
    torch.manual_seed(0)
    pos = build_positional(positional, 16, 8, 32, 10000.0)
    norm = (lambda: build_norm("rmsnorm", 8, 1e-5)) if qk_norm else None
    part = pos.layer_part(causal=True)
    attn = SelfAttention(16, 2, 0.0, True, "sdpa", n_kv_heads, norm, part).eval()
    x = torch.randn(2, 6, 16)
    full = attn(x, None, True, pos)
    cache = KVCache()
    steps = [attn(x[:, :3], None, True, pos, cache, 0)]  # a 3-token prefix, then one at a time
    steps += [attn(x[:, t : t + 1], None, True, pos, cache, t) for t in range(3, 6)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("positional", ["sinusoidal", "rope"])
def test_bf16_single_query_steps_attend_over_keys_rounded_up_to_8_and_masked(
    positional, monkeypatch
):
    """On a CPU, 16-bit products keep a compiled kernel per shape: one query over the cache
    takes its keys in lengths rounded up to a multiple of 8 (10 lengths -> 2 shapes), the
    extra (zeroed) keys masked; the output is the unrounded one's."""

    torch.manual_seed(0)
    attn = SelfAttention(16, 2, 0.0, True, "sdpa").eval().to(torch.bfloat16)
    pos = build_positional(positional, 16, 8, 32, 10000.0)
    x = torch.randn(3, 10, 16).to(torch.bfloat16)
    lengths = []
    kernel = attn.kernel

    def spy(q, k, *args):
        lengths.append(k.shape[-2])
        return kernel(q, k, *args)

    outputs = {}
    for multiple in (8, 1):
        monkeypatch.setattr(attention, "SHAPE_MULTIPLE", multiple)
        attn.kernel, cache = spy, KVCache()
        with torch.no_grad():
            steps = [attn(x[:, t : t + 1], None, True, pos, cache, t) for t in range(10)]
        outputs[multiple] = torch.cat(steps, dim=1)
    assert lengths[:10] == [8] * 8 + [16, 16]  # 2 shapes instead of 10
    assert lengths[10:] == list(range(1, 11))
    torch.testing.assert_close(outputs[8], outputs[1], rtol=0, atol=0)


def test_kv_cache_returns_a_zeroed_tail_when_rounding_up():
    """Masked keys weigh 0, and 0 times NaN is NaN: whatever the buffers held past the
    filled length (here NaN, as a fresh or reused buffer may), the rounded-up tail is 0."""
    cache = KVCache(capacity=16)
    cache.append(torch.ones(2, 1, 1, 4), torch.ones(2, 1, 1, 4))
    cache.k[..., 1:, :], cache.v[..., 1:, :] = float("nan"), float("nan")
    k, v = cache.append(torch.ones(2, 1, 2, 4), torch.ones(2, 1, 2, 4), multiple=8)
    assert k.shape[-2] == 8 and cache.length == 3
    assert k[..., 3:, :].abs().sum() == 0 and v[..., 3:, :].abs().sum() == 0
    cache.reorder(torch.tensor([1, 0]))  # into fresh spare buffers
    cache.k[..., 3:, :], cache.v[..., 3:, :] = float("nan"), float("nan")
    k, v = cache.append(torch.ones(2, 1, 1, 4), torch.ones(2, 1, 1, 4), multiple=8)
    assert k.shape[-2] == 8 and k[..., 4:, :].abs().sum() == 0 and v[..., 4:, :].abs().sum() == 0
    assert torch.isfinite(k).all() and torch.isfinite(v).all()


def _norm_formula(t: torch.Tensor, norm, kind: str) -> torch.Tensor:
    """LayerNorm (Ba et al. 2016) or RMSNorm (Zhang & Sennrich 2019) over the last axis."""
    if kind == "layernorm":
        centred = t - t.mean(-1, keepdim=True)
        return (
            centred / (centred.pow(2).mean(-1, keepdim=True) + 1e-5).sqrt() * norm.weight
            + norm.bias
        )
    return t / (t.pow(2).mean(-1, keepdim=True) + 1e-5).sqrt() * norm.weight


def _heads(t: torch.Tensor) -> torch.Tensor:
    return t.unflatten(-1, (-1, 8)).transpose(1, 2)  # (B, heads, T, 8)


@pytest.mark.parametrize("kind", ["layernorm", "rmsnorm"])
def test_grouped_queries_and_qk_norm_are_their_papers_formulas(kind):
    """Ainslie et al. 2023 with 4 query heads in 2 groups: head h attends with key/value
    head h // 2; QK-norm (Dehghani et al. 2023): each head's queries and keys normalised
    over Dh (a gain, and LayerNorm's bias, of Dh shared by the heads) before q k^T /
    sqrt(Dh). In self-attention (keys of x) and in a cross-attention given the norms (keys
    of the memory; t2's layers give it none, t2.model.attention says why)."""
    torch.manual_seed(0)
    make = lambda: build_norm(kind, 8, 1e-5)  # noqa: E731
    self_attn = SelfAttention(32, 4, 0.0, True, "sdpa", 2, make).double().eval()
    cross = CrossAttention(32, 4, 0.0, True, "sdpa", 2, make).double().eval()
    x, memory = torch.randn(2, 6, 32, dtype=torch.float64), torch.randn(2, 5, 32).double()
    for attn in (self_attn, cross):
        with torch.no_grad():
            for norm in (attn.q_norm, attn.k_norm):  # gains (and biases) that show
                for p in norm.parameters():
                    p.normal_(1.0, 0.5)
        if attn is self_attn:
            qkv = torch.nn.functional.linear(x, attn.qkv.weight, attn.qkv.bias)
            q, k, v = qkv.split([32, 16, 16], -1)
            got = attn(x, None, False, build_positional("none", 32, 8, 8, 1.0))
        else:
            q = attn.q(x)
            k, v = attn.kv(memory).split([16, 16], -1)
            got = attn(x, memory, None)
        q = _norm_formula(_heads(q), attn.q_norm, kind)
        k = _norm_formula(_heads(k), attn.k_norm, kind)
        v = _heads(v)
        group = [h // 2 for h in range(4)]
        weights = (q @ k[:, group].transpose(-1, -2) / 8**0.5).softmax(-1)
        want = attn.out_proj((weights @ v[:, group]).transpose(1, 2).flatten(2))
        torch.testing.assert_close(got, want)


def test_a_kernel_without_grouped_heads_gets_them_repeated_and_one_without_values_is_refused(
    monkeypatch, tiny_model_config
):
    """A kernel whose facts say neither `grouped` nor `values` (a plugin's, say) receives
    one key/value head per query head, and a scheme with a values term (Shaw's) refuses it
    when the model is built, in one line."""
    for name in ATTENTION.names():  # the error lists them: imported before the copy
        ATTENTION.entry(name)
    monkeypatch.setattr(ATTENTION, "_entries", dict(ATTENTION._entries))
    heads = []

    @ATTENTION.register("per_head", KernelFacts(fused=False))
    def per_head(q, k, v, key_padding, causal, dropout_p, bias=None):
        heads.append((q.shape[1], k.shape[1]))
        return ATTENTION.get("math")(q, k, v, key_padding, causal, dropout_p, bias)

    src, tgt = torch.randint(1, 50, (2, 7)), torch.randint(1, 50, (2, 5))
    outputs = []
    for kernel in ("math", "per_head"):
        torch.manual_seed(0)
        model = Transformer(tiny_model_config(attention=kernel, n_kv_heads=1)).eval()
        outputs.append(model(src, tgt))
    torch.testing.assert_close(outputs[1], outputs[0])
    assert set(heads) == {(2, 2)}  # 1 key/value head, repeated for the kernel
    with pytest.raises(ConfigError) as err:
        Transformer(tiny_model_config(attention="per_head", positional="relative"))
    assert str(err.value) == (
        "model.positional='relative' adds a term of the attention probabilities that "
        "model.attention='per_head' cannot take (its facts); choose one of flash_attn, "
        "math, sdpa, sdpa_cudnn"
    )
