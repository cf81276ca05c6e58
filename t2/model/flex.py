"""FlexAttention for the compiled CUDA pass's padded and biased attention
(`train.padded_attention: flex`; the default, `sdpa`, keeps SDPA's memory-efficient kernel).

FlexAttention (PyTorch >= 2.5) takes a block mask of the batch's padding and the causal
order, and a bias as a score modification (ALiBi's), so that a padded or biased attention
runs one fused kernel generated for it instead of falling off SDPA's flash kernel to its
memory-efficient one (which the H100 profile of 2026-11-27 showed for every padded
attention, at 5% of the step's CUDA time); the block mask also lets the kernel skip key
blocks that are all padding. Published measurements put FlexAttention at 40-65% of SDPA's
speed on padded batches, hence SDPA until `benchmarks/gpu.sh` measures both on a GPU.

A block mask is built once per forward pass (`BlockMasks`), not by each of the 12 layers:
every encoder self-attention sees the same source padding, every cross-attention the same
source padding under the target's queries. Only inside torch.compile on CUDA, where the
compiler builds the kernel (eagerly, FlexAttention runs an unfused reference, with no
backward pass on a CPU); without attention dropout, which it lacks. Its forward pass is
tested against the formula on a CPU, the compiled training pass through it on a GPU
(tests/test_cuda.py).
"""

from __future__ import annotations

from typing import Any

import torch

from t2.model.codepath import code_path
from t2.model.config import PADDED_ATTENTION
from t2.model.kernels import repeat_kv
from t2.torch_compat import FLEX_BLOCK_MASK, FLEX_GQA

Tensor = torch.Tensor


def flex_wanted(choice: str, t: Tensor) -> bool:
    """Whether a forward pass over `t` runs its masked attention on FlexAttention: asked
    for, on CUDA's code path, inside torch.compile."""
    if choice not in PADDED_ATTENTION:
        raise ValueError(f"padded_attention must be one of {', '.join(PADDED_ATTENTION)}")
    flex = choice == "flex" and FLEX_BLOCK_MASK  # else SDPA (t2.torch_compat records why)
    return flex and code_path(t) == "cuda" and torch.compiler.is_compiling()


def block_mask(
    key_padding: Tensor | None, causal: bool, rows: int, n_queries: int, n_keys: int, device
) -> Any:
    """FlexAttention's BlockMask: keys allowed where `key_padding` (B, Tk) is False and,
    if `causal`, up to the query's own position (bottom-right aligned)."""
    from torch.nn.attention.flex_attention import create_block_mask

    shift = n_keys - n_queries

    def allowed(b: Tensor, h: Tensor, qi: Tensor, ki: Tensor) -> Tensor:
        keep = ki >= 0
        if key_padding is not None:
            keep = keep & ~key_padding[b, ki]
        if causal:
            keep = keep & (ki <= qi + shift)
        return keep

    return create_block_mask(allowed, rows, None, n_queries, n_keys, device=device)


class BlockMasks:
    """One forward pass's block masks, each built at its first use under a name (the kind
    of attention: the encoder's, the decoder's, the cross-attention) and reused by every
    later layer of that kind."""

    def __init__(self) -> None:
        self.built: dict[str, Any] = {}

    def get(self, name: str, q: Tensor, k: Tensor, key_padding: Tensor | None, causal: bool):
        if name not in self.built:
            rows, n_queries, n_keys = q.shape[0], q.shape[-2], k.shape[-2]
            self.built[name] = block_mask(key_padding, causal, rows, n_queries, n_keys, q.device)
        return self.built[name]


def flex_attention_masked(
    q: Tensor, k: Tensor, v: Tensor, mask: Any, bias: Tensor | None
) -> Tensor:
    """softmax(q k^T / sqrt(Dh) + bias + mask) v for q (B, H, Tq, Dh), k and v (B, Hkv, Tk,
    Dh) with Hkv dividing H (t2.model.kernels); `mask` a BlockMask (block_mask); bias
    broadcastable to (B, H, Tq, Tk)."""
    from torch.nn.attention.flex_attention import flex_attention

    score_mod = None
    if bias is not None:
        rows, n_queries, n_keys = q.shape[0], q.shape[-2], k.shape[-2]
        table = bias.to(q.dtype)
        one_row = table.dim() < 4 or table.shape[0] == 1
        table = table.expand(1 if one_row else rows, q.shape[1], n_queries, n_keys)

        def score_mod(score: Tensor, b: Tensor, h: Tensor, qi: Tensor, ki: Tensor) -> Tensor:
            return score + table[0 if one_row else b, h, qi, ki]

    gqa = {"enable_gqa": True} if k.shape[1] != q.shape[1] else {}  # a literal, not a symbol
    if gqa and not FLEX_GQA:  # a torch without it (t2.torch_compat records why)
        k, v, gqa = *repeat_kv(k, v, q.shape[1]), {}
    return flex_attention(q, k, v, score_mod=score_mod, block_mask=mask, **gqa)
