"""The explicit formula, the reference every kernel is tested against."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from t2.facts import KernelFacts
from t2.model.kernels import Values, attention_weights, weighted_values
from t2.registry import ATTENTION

Tensor = torch.Tensor


@ATTENTION.register("math", KernelFacts(fused=False, grouped=True, values=True))
def math_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    key_padding: Tensor | None,
    causal: bool,
    dropout_p: float,
    bias: Tensor | None = None,
    values: Values | None = None,
) -> Tensor:
    """The explicit formula, for reference: softmax(q k^T / sqrt(Dh) + bias + mask) v."""
    weights = F.dropout(attention_weights(q, k, key_padding, causal, bias), p=dropout_p)
    return weighted_values(weights, v, values)
