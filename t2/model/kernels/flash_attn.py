"""FlashAttention-2, Dao 2023 (arXiv:2307.08691), where it applies."""

from __future__ import annotations

import importlib.util

import torch

from t2.facts import KernelFacts
from t2.model.kernels import Values
from t2.model.kernels.sdpa import sdpa_attention
from t2.registry import ATTENTION

Tensor = torch.Tensor
FLASH_ATTN_AVAILABLE = importlib.util.find_spec("flash_attn") is not None


@ATTENTION.register("flash_attn", KernelFacts(fused=True, grouped=True, values=True))
def flash_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    key_padding: Tensor | None,
    causal: bool,
    dropout_p: float,
    bias: Tensor | None = None,
    values: Values | None = None,
) -> Tensor:
    """FlashAttention-2 (Dao 2023) when installed, on CUDA in 16-bit and without a padding
    mask, bias or values term (decoder self-attention); everything else falls back to
    PyTorch's SDPA. It takes fewer key/value heads as they come (its MQA/GQA)."""
    usable = FLASH_ATTN_AVAILABLE and q.is_cuda and q.dtype in (torch.float16, torch.bfloat16)
    if not usable or key_padding is not None or bias is not None or values is not None:
        return sdpa_attention(q, k, v, key_padding, causal, dropout_p, bias, values)
    from flash_attn import flash_attn_func  # optional dependency: the flash extra

    out = flash_attn_func(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), dropout_p, causal=causal
    )  # (B, T, H, Dh)
    return out.transpose(1, 2)
