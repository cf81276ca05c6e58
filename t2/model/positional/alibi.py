"""Attention with linear biases, Press et al. 2022 (arXiv:2108.12409)."""

from __future__ import annotations

import torch
from torch import nn

from t2.facts import Ct2, PositionalFacts
from t2.model.positional import PerShape, Positional, relative_positions
from t2.registry import POSITIONAL


def alibi_slopes(n_heads: int) -> list[float]:
    """The heads' slopes, a geometric sequence starting at 2^(-8/n) with that ratio (Press et
    al. 2022, section 3); for a head count that is not a power of two, those of the power
    below, then every other slope of the power above, as the authors' code does."""
    if n_heads & (n_heads - 1) == 0:
        start = 2.0 ** (-8.0 / n_heads)
        return [start ** (i + 1) for i in range(n_heads)]
    below = 1 << (n_heads.bit_length() - 1)
    return alibi_slopes(below) + alibi_slopes(2 * below)[0::2][: n_heads - below]


@POSITIONAL.register(
    "alibi",
    PositionalFacts(
        order=True,
        summary="self-attention's scores biased by distance",
        params=lambda d_model, max_positions: 0,
        ct2=Ct2(unexpressed="CTranslate2 has ALiBi in decoder-only models, not in encoders"),
    ),
)
class AlibiPositional(Positional):
    """Attention with linear biases, Press et al. 2022 (arXiv:2108.12409): no position
    embeddings; head h adds -m_h * |i - j| to self-attention's score of query i and key j.
    In the decoder the causal mask leaves j <= i, the paper's -m_h * (i - j); the encoder
    sees keys on both sides, so the distance is symmetric. Extrapolates: no length limit."""

    def __init__(self, d_model: int, d_head: int, max_positions: int, base: float) -> None:
        super().__init__(d_model, d_head, max_positions, base)
        slopes = torch.tensor(alibi_slopes(d_model // d_head))
        self.register_buffer("slopes", slopes[:, None, None], False)  # (H, 1, 1)
        self._bias_of_shape: PerShape[torch.Tensor] = PerShape()

    def attention_bias(
        self, q: torch.Tensor, n_keys: int, offset: int, part: nn.Module | None = None
    ) -> torch.Tensor:
        """Built once per shape (PerShape)."""
        n_queries, device = q.shape[-2], q.device
        key = (n_queries, n_keys, offset, device, self.slopes.data_ptr())
        return self._bias_of_shape.get(key, lambda: self._bias(n_queries, n_keys, offset, device))

    def _bias(self, n_queries: int, n_keys: int, offset: int, device: torch.device) -> torch.Tensor:
        distance = relative_positions(n_queries, n_keys, offset, device).abs().float()
        return (-self.slopes.to(device) * distance)[None]  # (1, H, Tq, Tk)
