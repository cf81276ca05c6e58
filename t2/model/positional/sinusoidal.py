"""Fixed sinusoids added to the embeddings, Vaswani et al. 2017 section 3.5."""

from __future__ import annotations

import torch

from t2.facts import Ct2, PositionalFacts
from t2.model.positional import Positional
from t2.registry import POSITIONAL


def sinusoid_table(n_positions: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """PE[t, 2i] = sin(t / base^(2i/d)), PE[t, 2i+1] = cos(t / base^(2i/d)); shape (T, D)."""
    position = torch.arange(n_positions, dtype=torch.float64)[:, None]
    inv_freq = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    table = torch.zeros(n_positions, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq[: d_model // 2])
    return table.float()


@POSITIONAL.register(
    "sinusoidal",
    PositionalFacts(
        order=True,
        summary="fixed sinusoids added to the scaled embeddings",
        params=lambda d_model, max_positions: 0,
        # the table as position_encodings (CTranslate2's own sinusoids count from 1 with
        # another frequency step)
        ct2=Ct2(),
    ),
)
class SinusoidalPositional(Positional):
    """Fixed sinusoids added to the embeddings, Vaswani et al. 2017 section 3.5."""

    def __init__(self, d_model: int, d_head: int, max_positions: int, base: float) -> None:
        super().__init__(d_model, d_head, max_positions, base)
        self.d_model, self.base = d_model, base
        self.register_buffer("table", sinusoid_table(max_positions, d_model, base), False)

    def embed(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        end = offset + x.shape[1]
        if end > self.table.shape[0]:  # sinusoids extrapolate: grow the table on demand
            self.table = sinusoid_table(2 * end, self.d_model, self.base).to(x.device)
        return x + self.table[offset:end].to(x.dtype)

    def added_table(self, n_positions: int) -> torch.Tensor:
        return sinusoid_table(n_positions, self.d_model, self.base)
