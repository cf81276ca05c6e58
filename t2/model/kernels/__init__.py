"""Attention kernels (model.attention), one module each: sdpa, sdpa_cudnn, math and
flash_attn; every one computes softmax(q k^T / sqrt(Dh) + bias + mask) v and registers with
its facts (t2.facts.KernelFacts). What they share is here.

A kernel takes q of shape (B, H, Tq, Dh), k and v of (B, Hkv, Tk, Dh), an optional key
padding mask (B, Tk) with True at padding, a causal flag, the dropout probability, an
optional additive `bias` broadcastable to (B, H, Tq, Tk) in float (a positional scheme's,
such as ALiBi's) and an optional `values` term: a function of the probabilities (B, H, Tq,
Tk), after dropout, whose (B, H, Tq, Dh) is added to the output (Shaw's relative values).
Hkv divides H: each key/value head serves H / Hkv consecutive query heads (grouped-query
attention, Ainslie et al. 2023; multi-query for Hkv = 1, Shazeer 2019), as transformers'
repeat_kv and SDPA's enable_gqa order them. Every built-in kernel takes fewer key/value
heads and a values term (their facts say `grouped` and `values`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from t2.model.codepath import code_path
from t2.model.interface import takes
from t2.registry import ATTENTION
from t2.torch_compat import SDPA_PRIORITY

Tensor = torch.Tensor
CALL = ("q", "k", "v", "key_padding", "causal", "dropout_p", "bias")  # as attention calls


def kernel_named(name: str) -> Callable[..., Tensor]:
    """The kernel registered as `name`, checked to take the call attention makes: with the
    values term too where its facts say it takes one (Shaw's relative positions)."""
    kernel = ATTENTION.get(name)
    takes(ATTENTION, name, kernel, *CALL, *(("values",) if ATTENTION.facts(name).values else ()))
    return kernel


Values = Callable[[Tensor], Tensor]  # a term of the probabilities, added to the output


def repeat_kv(k: Tensor, v: Tensor, heads: int) -> tuple[Tensor, Tensor]:
    """k and v (B, Hkv, T, Dh) with each head repeated for its heads / Hkv query heads."""
    group = heads // k.shape[-3]
    return k.repeat_interleave(group, -3), v.repeat_interleave(group, -3)


def _bool_mask(
    key_padding: Tensor | None, causal: bool, tq: int, tk: int, device: torch.device
) -> Tensor | None:
    """A mask with True where attention is allowed, broadcastable to (B, H, Tq, Tk)."""
    mask = None
    if key_padding is not None:
        mask = ~key_padding[:, None, None, :]  # (B, 1, 1, Tk)
    if causal:  # bottom-right aligned: query i sees keys up to i + (Tk - Tq)
        tri = torch.ones(tq, tk, dtype=torch.bool, device=device).tril(tk - tq)
        mask = tri if mask is None else mask & tri
    return mask


# On a CPU, PyTorch's SDPA is slower than the explicit formula (`math_attention`: two
# einsums and a softmax in the input's dtype) over up to 128 keys: its flash kernel is tiled
# for long sequences, and its math backend upcasts bf16 to fp32. Measured on 2 cores, 8
# heads of 64 (docs/performance.md): a training step (forward and backward) over 32 keys
# takes 22.8 ms with flash in bf16, 12.6 with SDPA's math backend, 5.6 with the formula,
# which also saves less (fp32: 12.5 / 8.6 / 8.0); a decoding step (one query, 128 rows)
# over 32 keys 1,054 us with SDPA and 468 with the formula, but 159 against 295 over 4
# keys, so single queries in float32 take the formula from 16 keys on. In bfloat16 SDPA's
# single-query steps are 3-4x slower than the formula at every length (654 against 217 us
# over 1 key, 1,919 against 468 over 16). From 256 keys SDPA wins.
CPU_FORMULA_MAX_KEYS = 128
CPU_FORMULA_MIN_KEYS_ONE_QUERY = 16  # float32; below 16 bits, from 1 key


def formula_is_faster(q: Tensor, k: Tensor) -> bool:
    """On a CPU, eagerly, over few keys; compiled, SDPA always (one graph for every
    length: a choice by length would recompile at each threshold)."""
    keys = k.shape[-2]
    if code_path(q) != "cpu" or keys > CPU_FORMULA_MAX_KEYS or torch.compiler.is_compiling():
        return False
    few_keys = keys < CPU_FORMULA_MIN_KEYS_ONE_QUERY and q.dtype == torch.float32
    return q.shape[-2] > 1 or not few_keys


# On CUDA, PyTorch (>= 2.11) runs a masked SDPA call on cuDNN's kernel first, which builds a
# plan for every new (rows, query length, key length): ~11 ms of host time at the first
# sight of each shape, measured on an H100 (torch.compile and CUDA graphs pay per shape as
# well). t2 names the backends instead: flash (no mask: unpadded causal or full attention)
# and memory-efficient (a padding mask), in that order, the math backend only where
# neither applies; cuDNN only when asked for (`model.attention: sdpa_cudnn`).
CUDA_BACKENDS = (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH)
CUDNN_FIRST = (SDPBackend.CUDNN_ATTENTION, *CUDA_BACKENDS)


def _float_mask(
    key_padding: Tensor | None, causal: bool, bias: Tensor, q: Tensor, tk: int
) -> Tensor:
    """The additive mask of a biased attention: `bias`, with -inf where attention is not
    allowed, in q's dtype (SDPA's float attn_mask)."""
    mask = _bool_mask(key_padding, causal, q.shape[-2], tk, q.device)
    out = bias.to(q.dtype)
    return out if mask is None else out.masked_fill(~mask, float("-inf"))


def sdpa_on(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    key_padding: Tensor | None,
    causal: bool,
    dropout_p: float,
    backends: tuple[SDPBackend, ...],
    bias: Tensor | None,
) -> Tensor:
    """F.scaled_dot_product_attention, on `backends` (in that order) on CUDA; a bias goes
    in as a float mask (flash has none: the memory-efficient kernel takes it). The compiled
    CUDA pass may run masked attention on FlexAttention instead (t2.model.flex)."""
    if bias is not None:
        mask, is_causal = _float_mask(key_padding, causal, bias, q, k.shape[-2]), False
    elif key_padding is None and (not causal or q.shape[-2] == k.shape[-2]):
        mask, is_causal = None, causal
    else:
        mask = _bool_mask(key_padding, causal, q.shape[-2], k.shape[-2], q.device)
        is_causal = False
    cuda = code_path(q) == "cuda"
    gqa = {}  # a literal True where it applies: compiled, a comparison is a symbol
    if k.shape[-3] != q.shape[-3] and mask is not None and cuda:
        k, v = repeat_kv(k, v, q.shape[-3])  # CUDA's masked kernel has no GQA (its doc)
    elif k.shape[-3] != q.shape[-3]:
        gqa = {"enable_gqa": True}
    with sdpa_kernel(list(backends), **SDPA_PRIORITY) if cuda else contextlib.nullcontext():
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal, **gqa
        )


def attention_weights(
    q: Tensor, k: Tensor, key_padding: Tensor | None, causal: bool, bias: Tensor | None = None
) -> Tensor:
    """The attention probabilities softmax(q k^T / sqrt(Dh) + bias + mask), (B, H, Tq, Tk)."""
    # no `import math` in this package: its kernel module t2.model.kernels.math would
    # take that name here once imported
    if k.shape[-3] == q.shape[-3]:
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / q.shape[-1] ** 0.5
    else:  # query heads (Hkv, group): each group's over its one key head
        grouped = q.unflatten(-3, (k.shape[-3], -1))
        scores = torch.einsum("bngqd,bnkd->bngqk", grouped, k).flatten(-4, -3) / q.shape[-1] ** 0.5
    if bias is not None:
        scores = scores + bias.to(scores.dtype)
    mask = _bool_mask(key_padding, causal, q.shape[-2], k.shape[-2], q.device)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(dim=-1)


def weighted_values(weights: Tensor, v: Tensor, values: Values | None = None) -> Tensor:
    """The probabilities (B, H, Tq, Tk) times v (B, Hkv, Tk, Dh), plus the `values` term."""
    if v.shape[-3] == weights.shape[-3]:
        out = torch.einsum("bhqk,bhkd->bhqd", weights, v)
    else:
        grouped = weights.unflatten(-3, (v.shape[-3], -1))
        out = torch.einsum("bngqk,bnkd->bngqd", grouped, v).flatten(-4, -3)
    return out if values is None else out + values(weights)
