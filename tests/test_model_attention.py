"""Attention kernels against the formula and each other, the flash_attn fallback, the KV cache."""

from __future__ import annotations

import math

import pytest
import torch

import t2.model.attention as attention
from t2.model.attention import CrossAttention, KVCache, SelfAttention
from t2.model.codepath import simulated
from t2.model.positional import build_positional
from t2.registry import ATTENTION

pytestmark = pytest.mark.usefixtures("single_thread")


def _reference(q, k, v, key_padding, causal):
    """softmax(q k^T / sqrt(Dh)) v, one query at a time, causal bottom-right aligned."""
    B, H, Tq, Dh = q.shape  # noqa: N806
    Tk = k.shape[-2]  # noqa: N806
    out = torch.zeros_like(q)
    for b in range(B):
        for i in range(Tq):
            allowed = torch.ones(Tk, dtype=torch.bool)
            if key_padding is not None:
                allowed &= ~key_padding[b]
            if causal:
                allowed[i + Tk - Tq + 1 :] = False
            keys, values = k[b][:, allowed], v[b][:, allowed]  # (H, n, Dh)
            scores = torch.einsum("hd,hnd->hn", q[b, :, i], keys) / math.sqrt(Dh)
            out[b, :, i] = torch.einsum("hn,hnd->hd", scores.softmax(-1), values)
    return out


def _qkv(tq=5, tk=5, dtype=torch.float32):
    torch.manual_seed(0)
    return [torch.randn(2, 3, t, 8, dtype=dtype) for t in (tq, tk, tk)]


PADDING = torch.tensor([[False] * 5, [False, False, False, True, True]])
CASES = {  # name: (tq, tk, key padding, causal)
    "plain": (5, 5, None, False),
    "padding": (5, 5, PADDING, False),
    "causal": (5, 5, None, True),
    "causal_padding": (5, 5, PADDING, True),
    "causal_one_query_over_prefix": (1, 5, None, True),
    "causal_two_queries_over_prefix": (2, 5, None, True),
    "cross_shapes_padding": (3, 5, PADDING, False),
}


@pytest.mark.parametrize("kernel", ATTENTION.names())
@pytest.mark.parametrize("case", CASES)
def test_kernels_agree_with_formula_in_float32(kernel, case):
    tq, tk, pad, causal = CASES[case]
    q, k, v = _qkv(tq, tk)
    expected = _reference(q.double(), k.double(), v.double(), pad, causal).float()
    out = ATTENTION.get(kernel)(q, k, v, pad, causal, 0.0)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("max_keys", [0, 10**6], ids=["cpu_sdpa", "cpu_formula"])
@pytest.mark.parametrize("case", CASES)
def test_sdpa_paths_chosen_by_key_count_agree_with_formula(monkeypatch, case, max_keys):
    """On a CPU sdpa runs the formula up to CPU_FORMULA_MAX_KEYS keys, PyTorch's SDPA beyond."""
    monkeypatch.setattr(attention, "CPU_FORMULA_MAX_KEYS", max_keys)
    monkeypatch.setattr(attention, "CPU_FORMULA_MIN_KEYS_ONE_QUERY", 0)
    tq, tk, pad, causal = CASES[case]
    q, k, v = (t.requires_grad_() for t in _qkv(tq, tk))
    out = attention.sdpa_attention(q, k, v, pad, causal, 0.0)
    expected = _reference(q.double(), k.double(), v.double(), pad, causal).float()
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    grads = torch.autograd.grad(out.sum(), (q, k, v))
    want = torch.autograd.grad(_reference(q, k, v, pad, causal).sum(), (q, k, v))
    for got, ref in zip(grads, want, strict=True):
        torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-5)


def test_the_cpu_formula_rule_by_keys_queries_and_type():
    """Which CPU calls take the formula: many queries up to 128 keys; one query from 16 keys
    in float32 and from 1 key in bfloat16 (where SDPA's single-query path is 3-4x slower)."""

    def formula(tq: int, tk: int, dtype: torch.dtype = torch.float32) -> bool:
        q, k = torch.zeros(1, 1, tq, 8, dtype=dtype), torch.zeros(1, 1, tk, 8, dtype=dtype)
        return attention._formula_is_faster(q, k)

    assert formula(32, 32) and formula(2, 128) and not formula(32, 129)
    assert formula(1, 16) and not formula(1, 15) and not formula(1, 200)
    assert formula(1, 1, torch.bfloat16) and not formula(1, 129, torch.bfloat16)


@pytest.mark.parametrize("case", CASES)
def test_kernels_agree_with_each_other(case):
    tq, tk, pad, causal = CASES[case]
    q, k, v = _qkv(tq, tk)
    outs = {name: ATTENTION.get(name)(q, k, v, pad, causal, 0.0) for name in ATTENTION.names()}
    for name, out in outs.items():
        torch.testing.assert_close(out, outs["sdpa"], rtol=1e-5, atol=1e-5, msg=name)


@pytest.mark.parametrize("installed", [False, True])
def test_flash_attn_falls_back_to_sdpa_off_cuda(monkeypatch, installed):
    # on CPU (or without the package) flash_attn must give SDPA's result, never import it
    monkeypatch.setattr(attention, "FLASH_ATTN_AVAILABLE", installed)
    for case in ("causal", "padding"):
        tq, tk, pad, causal = CASES[case]
        q, k, v = _qkv(tq, tk)
        out = ATTENTION.get("flash_attn")(q, k, v, pad, causal, 0.0)
        torch.testing.assert_close(out, attention.sdpa_attention(q, k, v, pad, causal, 0.0))


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


@pytest.mark.parametrize("positional", ["none", "rope"])
def test_self_attention_with_cache_equals_full_causal_pass(positional):
    torch.manual_seed(0)
    attn = SelfAttention(16, 2, 0.0, True, "sdpa").eval()
    pos = build_positional(positional, 16, 8, 32, 10000.0)
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
    import t2.model.attention as attention

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


def _enabled_backends() -> set[str]:
    cuda = torch.backends.cuda
    flags = {"flash": cuda.flash_sdp_enabled(), "efficient": cuda.mem_efficient_sdp_enabled(),
             "cudnn": cuda.cudnn_sdp_enabled(), "math": cuda.math_sdp_enabled()}  # fmt: skip
    return {name for name, on in flags.items() if on}


def _cuda_kernel(masked: bool, enabled: set[str]) -> str:
    """The kernel PyTorch's CUDA dispatch takes among the enabled ones, in t2's priority
    (cuDNN first when enabled): flash takes no mask, so a padding mask goes past it."""
    for name in ("cudnn", "flash", "efficient", "math"):
        if name in enabled and not (name == "flash" and masked):
            return name
    raise AssertionError(f"no kernel enabled: {enabled}")


@pytest.mark.parametrize(("kernel", "expected"), [
    ("sdpa", {"encoder self": "efficient", "decoder self": "flash", "cross": "efficient"}),
    ("sdpa_cudnn", {"encoder self": "cudnn", "decoder self": "cudnn", "cross": "cudnn"}),
])  # fmt: skip
def test_on_cuda_each_attention_takes_a_kernel_without_per_shape_plans(
    monkeypatch, tiny_model_config, kernel, expected
):
    """The training forward pass on CUDA's code path (observed on a CPU, SDPA replaced by a
    spy that records the backends enabled at each call)."""
    from t2.model.transformer import Transformer

    calls, real = [], torch.nn.functional.scaled_dot_product_attention

    def spy(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False):
        calls.append((attn_mask is not None, is_causal, _enabled_backends()))
        return real(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal)

    monkeypatch.setattr(attention.F, "scaled_dot_product_attention", spy)
    model = Transformer(tiny_model_config(attention=kernel), pad_id=0).train()
    src = torch.tensor([[5, 6, 7, 8], [5, 6, 0, 0]])  # padded sources
    tgt_in = torch.tensor([[1, 9, 10], [1, 9, 0]])
    with simulated("cuda"):  # CUDA's code path on CPU tensors: no packing, no formula
        model(src, tgt_in, torch.tensor([[9, 10, 2], [9, 2, 0]]), 0.1)
    assert _enabled_backends() == {"flash", "efficient", "cudnn", "math"}  # restored after
    named = dict(zip(("encoder self", "decoder self", "cross"), calls, strict=True))
    assert named["decoder self"][1] and not named["decoder self"][0]  # causal, no mask
    for name, (masked, _, enabled) in named.items():
        assert ("cudnn" in enabled) == (kernel == "sdpa_cudnn"), name
        assert _cuda_kernel(masked, enabled) == expected[name], name
