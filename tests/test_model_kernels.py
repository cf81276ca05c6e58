"""Attention kernels (t2/model/kernels/): each registered kernel against the formula,
softmax(q k^T / sqrt(Dh) + bias + mask) v, computed one query at a time in float64; the
CPU's choice between SDPA and the formula; flash_attn's fallback; the CUDA backends."""

from __future__ import annotations

import contextlib
import math

import pytest
import torch

import t2.model.kernels as kernels
import t2.model.kernels.flash_attn as flash_attn
from t2.model.codepath import simulated
from t2.model.kernels.sdpa import sdpa_attention
from t2.registry import ATTENTION

pytestmark = pytest.mark.usefixtures("single_thread")


def _reference(q, k, v, key_padding, causal, bias=None):
    """softmax(q k^T / sqrt(Dh) + bias) v, one query at a time, causal bottom-right aligned."""
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
            if bias is not None:
                scores = scores + bias[0, :, i, allowed].to(scores.dtype)
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
    monkeypatch.setattr(kernels, "CPU_FORMULA_MAX_KEYS", max_keys)
    monkeypatch.setattr(kernels, "CPU_FORMULA_MIN_KEYS_ONE_QUERY", 0)
    tq, tk, pad, causal = CASES[case]
    q, k, v = (t.requires_grad_() for t in _qkv(tq, tk))
    out = sdpa_attention(q, k, v, pad, causal, 0.0)
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
        return kernels.formula_is_faster(q, k)

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
    monkeypatch.setattr(flash_attn, "FLASH_ATTN_AVAILABLE", installed)
    for case in ("causal", "padding"):
        tq, tk, pad, causal = CASES[case]
        q, k, v = _qkv(tq, tk)
        out = ATTENTION.get("flash_attn")(q, k, v, pad, causal, 0.0)
        torch.testing.assert_close(out, sdpa_attention(q, k, v, pad, causal, 0.0))


def _enabled_backends() -> set[str]:
    cuda = torch.backends.cuda
    flags = {
        "flash": cuda.flash_sdp_enabled(),
        "efficient": cuda.mem_efficient_sdp_enabled(),
        "cudnn": cuda.cudnn_sdp_enabled(),
        "math": cuda.math_sdp_enabled(),
    }
    return {name for name, on in flags.items() if on}


def _cuda_kernel(masked: bool, enabled: set[str]) -> str:
    """The kernel PyTorch's CUDA dispatch takes among the enabled ones, in t2's priority
    (cuDNN first when enabled): flash takes no mask, so a padding mask goes past it."""
    for name in ("cudnn", "flash", "efficient", "math"):
        if name in enabled and not (name == "flash" and masked):
            return name
    raise AssertionError(f"no kernel enabled: {enabled}")


@pytest.mark.parametrize(
    ("kernel", "expected"),
    [
        ("sdpa", {"encoder self": "efficient", "decoder self": "flash", "cross": "efficient"}),
        ("sdpa_cudnn", {"encoder self": "cudnn", "decoder self": "cudnn", "cross": "cudnn"}),
    ],
)
def test_on_cuda_each_attention_takes_a_kernel_without_per_shape_plans(
    monkeypatch, tiny_model_config, kernel, expected
):
    """The training forward pass on CUDA's code path (observed on a CPU, SDPA replaced by a
    spy that records the backends enabled at each call)."""
    from t2.model.transformer import Transformer

    calls, real = [], torch.nn.functional.scaled_dot_product_attention

    def spy(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, enable_gqa=False):
        calls.append((attn_mask is not None, is_causal, _enabled_backends()))
        return real(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal)

    monkeypatch.setattr(kernels.F, "scaled_dot_product_attention", spy)
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


def _bias(tq: int, tk: int) -> torch.Tensor:
    """An arbitrary additive bias (1, H, Tq, Tk) in float32."""
    return torch.linspace(-3.0, 1.0, 3 * tq * tk).view(1, 3, tq, tk)


@pytest.mark.parametrize("kernel", ATTENTION.names())
@pytest.mark.parametrize("case", CASES)
def test_kernels_add_a_bias_to_the_scores(kernel, case):
    """Every kernel takes an additive bias (ALiBi's): forward and gradients as the formula."""
    tq, tk, pad, causal = CASES[case]
    q, k, v = (t.requires_grad_() for t in _qkv(tq, tk))
    bias = _bias(tq, tk)
    out = ATTENTION.get(kernel)(q, k, v, pad, causal, 0.0, bias)
    expected = _reference(q.double(), k.double(), v.double(), pad, causal, bias.double())
    torch.testing.assert_close(out, expected.float(), rtol=1e-5, atol=1e-5)
    grads = torch.autograd.grad(out.sum(), (q, k, v))
    want = torch.autograd.grad(_reference(q, k, v, pad, causal, bias).sum(), (q, k, v))
    for got, ref in zip(grads, want, strict=True):
        torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("max_keys", [0, 10**6], ids=["cpu_sdpa", "cpu_formula"])
def test_sdpa_takes_the_bias_on_both_cpu_paths(monkeypatch, max_keys):
    monkeypatch.setattr(kernels, "CPU_FORMULA_MAX_KEYS", max_keys)
    tq, tk, pad, causal = CASES["causal_padding"]
    q, k, v = _qkv(tq, tk)
    bias = _bias(tq, tk)
    expected = _reference(q.double(), k.double(), v.double(), pad, causal, bias.double())
    out = sdpa_attention(q, k, v, pad, causal, 0.0, bias)
    torch.testing.assert_close(out, expected.float(), rtol=1e-5, atol=1e-5)


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
@pytest.mark.parametrize(
    ("padded", "causal", "biased"),
    [(True, False, False), (False, True, False), (True, True, True), (False, False, True)],
)
def test_flex_attention_with_padding_causality_and_bias_is_the_formula(padded, causal, biased):
    """The compiled CUDA pass's masked attention (t2.model.flex): its block mask and score
    modification give the formula's output; queries fewer than keys, causal bottom-right."""
    from t2.model.flex import block_mask, flex_attention_masked
    from t2.model.kernels.math import math_attention

    torch.manual_seed(0)
    q, k, v = torch.randn(3, 2, 5, 8), torch.randn(3, 2, 7, 8), torch.randn(3, 2, 7, 8)
    pad = torch.zeros(3, 7, dtype=torch.bool)
    pad[1, 4:] = True
    pad = pad if padded else None
    bias = -torch.rand(1, 2, 5, 7) if biased else None
    mask = block_mask(pad, causal, 3, 5, 7, q.device)
    got = flex_attention_masked(q, k, v, mask, bias)
    torch.testing.assert_close(got, math_attention(q, k, v, pad, causal, 0.0, bias))


def test_flex_is_taken_only_when_asked_for_on_cudas_path_inside_the_compiler():
    """train.padded_attention=flex applies to the compiled CUDA pass alone: eagerly
    FlexAttention runs an unfused reference, and on a CPU it has no backward pass."""
    from t2.model.codepath import simulated
    from t2.model.flex import flex_wanted

    t = torch.zeros(2)
    assert not flex_wanted("flex", t) and not flex_wanted("sdpa", t)
    with simulated("cuda"):
        assert not flex_wanted("flex", t)  # eagerly
        for choice, taken in (("flex", 1.0), ("sdpa", 0.0)):
            torch._dynamo.reset()
            traced = torch.compile(
                lambda x, c=choice: x + flex_wanted(c, x), backend="eager", fullgraph=True
            )
            assert traced(t).tolist() == [taken, taken], choice
    with pytest.raises(ValueError, match="padded_attention must be one of sdpa, flex"):
        flex_wanted("fast", t)


def _grouped_qkv(tq: int, tk: int, kv_heads: int) -> list[torch.Tensor]:
    """q of 4 heads, k and v of `kv_heads`, float32, with gradients."""
    g = torch.Generator().manual_seed(1)
    shapes = ((2, 4, tq, 8), (2, kv_heads, tk, 8), (2, kv_heads, tk, 8))
    return [torch.randn(s, generator=g).requires_grad_() for s in shapes]


def _grouped_reference(q, k, v, pad, causal, bias=None, per_key=None):
    """Ainslie et al. 2023: query head h attends with key/value head h // (H / Hkv); the
    values term sum_j alpha_ij per_key_j is the formula with v_j + per_key_j."""
    head = [h * k.shape[1] // q.shape[1] for h in range(q.shape[1])]  # its group's kv head
    v = v[:, head] if per_key is None else v[:, head] + per_key
    return _reference(q, k[:, head], v, pad, causal, bias)


@pytest.mark.parametrize("kv_heads", [1, 2])
@pytest.mark.parametrize("kernel", ATTENTION.names())
@pytest.mark.parametrize("case", ["padding", "causal_padding", "causal_two_queries_over_prefix"])
def test_kernels_take_fewer_kv_heads_a_bias_and_a_values_term(kernel, case, kv_heads):
    """Multi-query (1) and grouped-query (2 of 4) keys and values, with a bias (T5's, the
    keys of Shaw's) and a term of the probabilities (Shaw's values), here sum_j alpha_ij
    U_j: forward and gradients as the formula."""
    tq, tk, pad, causal = CASES[case]
    q, k, v = _grouped_qkv(tq, tk, kv_heads)
    bias = torch.linspace(-3.0, 1.0, 4 * tq * tk).view(1, 4, tq, tk)
    per_key = torch.linspace(-1.0, 1.0, tk * 8).view(tk, 8)
    out = ATTENTION.get(kernel)(q, k, v, pad, causal, 0.0, bias, lambda w: w @ per_key)
    plain = ATTENTION.get(kernel)(q, k, v, pad, causal, 0.0)
    want = _grouped_reference(q, k, v, pad, causal, bias, per_key)
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(plain, _grouped_reference(q, k, v, pad, causal))
    grads = torch.autograd.grad(out.sum(), (q, k, v))
    for got, ref in zip(grads, torch.autograd.grad(want.sum(), (q, k, v)), strict=True):
        torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("path", ["cpu_sdpa", "cuda", "cuda_cudnn"])
@pytest.mark.parametrize("case", ["plain", "causal", "padding", "causal_one_query_over_prefix"])
def test_sdpa_takes_grouped_heads_on_every_path(monkeypatch, path, case):
    """SDPA with fewer key/value heads: enable_gqa where the kernel takes it, on CUDA's
    masked path (whose memory-efficient kernel has no GQA) the heads repeated."""
    monkeypatch.setattr(kernels, "CPU_FORMULA_MAX_KEYS", 0)
    tq, tk, pad, causal = CASES[case]
    q, k, v = _grouped_qkv(tq, tk, 2)
    kernel = ATTENTION.get("sdpa_cudnn" if path == "cuda_cudnn" else "sdpa")
    with simulated("cuda") if path.startswith("cuda") else contextlib.nullcontext():
        out = kernel(q, k, v, pad, causal, 0.0)
    torch.testing.assert_close(out, _grouped_reference(q, k, v, pad, causal))


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_flex_attention_takes_one_kv_head_and_a_bias_per_row():
    """The compiled CUDA pass's masked attention with multi-query keys and values and a
    bias of each batch row (a bias of the queries, as Shaw's keys)."""
    from t2.model.flex import block_mask, flex_attention_masked
    from t2.model.kernels.math import math_attention

    torch.manual_seed(0)
    q, k, v = torch.randn(3, 2, 5, 8), torch.randn(3, 1, 7, 8), torch.randn(3, 1, 7, 8)
    pad = torch.zeros(3, 7, dtype=torch.bool)
    pad[1, 4:] = True
    bias = -torch.rand(3, 2, 5, 7)
    got = flex_attention_masked(q, k, v, block_mask(pad, True, 3, 5, 7, "cpu"), bias)
    torch.testing.assert_close(got, math_attention(q, k, v, pad, True, 0.0, bias))
