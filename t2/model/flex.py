"""Masked attention for the compiled CUDA pass: FlexAttention (PyTorch >= 2.5) with a
block mask of the batch's padding and the causal order, and a bias as a score
modification (ALiBi's), so that a padded or biased attention runs one fused kernel
generated for it instead of falling off SDPA's flash kernel to its memory-efficient one
(which the H100 profile of 2026-11-27 showed for every padded attention). The block mask
also lets the kernel skip the key blocks that are all padding. Used only inside
torch.compile on a CUDA device, where the compiler builds the kernel (eagerly,
FlexAttention runs an unfused reference, and has no backward pass on a CPU); without
attention dropout, which it lacks. Its forward pass is tested against the formula on a
CPU, the compiled training pass through it on a GPU (tests/test_cuda.py).
"""

from __future__ import annotations

import torch

Tensor = torch.Tensor


def flex_attention_masked(
    q: Tensor, k: Tensor, v: Tensor, key_padding: Tensor | None, causal: bool, bias: Tensor | None
) -> Tensor:
    """softmax(q k^T / sqrt(Dh) + bias + mask) v for q (B, H, Tq, Dh), k and v (B, Hkv, Tk,
    Dh) with Hkv dividing H (t2.model.kernels); key_padding (B, Tk) True at padding; causal
    bottom-right aligned; bias broadcastable to (B, H, Tq, Tk)."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    rows, n_queries, n_keys = q.shape[0], q.shape[-2], k.shape[-2]
    shift = n_keys - n_queries

    def allowed(b: Tensor, h: Tensor, qi: Tensor, ki: Tensor) -> Tensor:
        keep = ki >= 0
        if key_padding is not None:
            keep = keep & ~key_padding[b, ki]
        if causal:
            keep = keep & (ki <= qi + shift)
        return keep

    block_mask = create_block_mask(allowed, rows, None, n_queries, n_keys, device=q.device)
    score_mod = None
    if bias is not None:
        table = bias.to(q.dtype)
        one_row = table.dim() < 4 or table.shape[0] == 1
        table = table.expand(1 if one_row else rows, q.shape[1], n_queries, n_keys)

        def score_mod(score: Tensor, b: Tensor, h: Tensor, qi: Tensor, ki: Tensor) -> Tensor:
            return score + table[0 if one_row else b, h, qi, ki]

    gqa = {"enable_gqa": True} if k.shape[1] != q.shape[1] else {}  # a literal, not a symbol
    return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask, **gqa)
