"""PyTorch's SDPA with cuDNN's kernel first on CUDA."""

from __future__ import annotations

import torch

from t2.facts import KernelFacts
from t2.model.kernels import CUDNN_FIRST, Values, formula_is_faster, sdpa_on
from t2.model.kernels.math import math_attention
from t2.registry import ATTENTION

Tensor = torch.Tensor


@ATTENTION.register("sdpa_cudnn", KernelFacts(fused=True, grouped=True, values=True))
def sdpa_cudnn_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    key_padding: Tensor | None,
    causal: bool,
    dropout_p: float,
    bias: Tensor | None = None,
    values: Values | None = None,
) -> Tensor:
    """`sdpa` with cuDNN's kernel first on CUDA (it builds a plan per shape; with few
    shapes, data.max_shapes, that cost is paid a bounded number of times)."""
    if values is not None or formula_is_faster(q, k):  # a values term needs the weights
        return math_attention(q, k, v, key_padding, causal, dropout_p, bias, values)
    return sdpa_on(q, k, v, key_padding, causal, dropout_p, CUDNN_FIRST, bias)
