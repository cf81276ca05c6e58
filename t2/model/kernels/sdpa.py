"""PyTorch's fused scaled_dot_product_attention."""

from __future__ import annotations

import torch

from t2.facts import KernelFacts
from t2.model.kernels import CUDA_BACKENDS, Values, formula_is_faster, sdpa_on
from t2.model.kernels.math import math_attention
from t2.registry import ATTENTION

Tensor = torch.Tensor


@ATTENTION.register("sdpa", KernelFacts(fused=True, grouped=True, values=True))
def sdpa_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    key_padding: Tensor | None,
    causal: bool,
    dropout_p: float,
    bias: Tensor | None = None,
    values: Values | None = None,
) -> Tensor:
    """PyTorch's fused scaled_dot_product_attention: on CUDA its flash and memory-efficient
    kernels (CUDA_BACKENDS), on a CPU the explicit formula where that is faster (at most
    128 keys)."""
    if values is not None or formula_is_faster(q, k):  # a values term needs the weights
        return math_attention(q, k, v, key_padding, causal, dropout_p, bias, values)
    return sdpa_on(q, k, v, key_padding, causal, dropout_p, CUDA_BACKENDS, bias)
