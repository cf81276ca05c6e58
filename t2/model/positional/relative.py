"""Relation-aware self-attention with relative position representations, Shaw, Uszkoreit
& Vaswani 2018 (arXiv:1803.02155): OpenNMT's and eole's `max_relative_positions`."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from t2.facts import Ct2, PositionalFacts
from t2.model.positional import PerShape, Positional, relative_positions
from t2.registry import POSITIONAL

# k, the clipping distance: 16 in the paper's translation experiments (its ablation over k
# changes little from k = 2 on); every distance past k shares the representation of k
CLIP = 16
ROWS = 2 * CLIP + 1  # distances -k .. k


class RelativeTables(nn.Module):
    """One self-attention layer's w^K and w^V (2k+1, Dh), rows for the distances -k .. k,
    shared by its heads (the paper's section 3.3), Glorot-uniform as t2's matrices."""

    def __init__(self, d_head: int) -> None:
        super().__init__()
        self.keys = nn.Parameter(nn.init.xavier_uniform_(torch.empty(ROWS, d_head)))
        self.values = nn.Parameter(nn.init.xavier_uniform_(torch.empty(ROWS, d_head)))


def _keys(cfg: object, part: RelativeTables) -> torch.Tensor:
    return part.keys.detach()


def _values(cfg: object, part: RelativeTables) -> torch.Tensor:
    return part.values.detach()


@POSITIONAL.register(
    "relative",
    PositionalFacts(
        order=True,
        summary="learned key and value vectors of each clipped distance in self-attention",
        params=lambda d_model, max_positions: 0,
        layer_params=lambda d_head, n_heads: 2 * ROWS * d_head,
        # q w^K^T and P w^V: 2 x 2 Tq (2k+1) Dh a head
        flops=lambda s_q, s_k, d_model: 4 * s_q * ROWS * d_model,
        saved=lambda s_q, s_k, n_heads: n_heads * s_q * ROWS,  # P, for P w^V's backward
        weights=True,
        ct2=Ct2(
            {"relative_position": True},
            {"relative_position_keys": _keys, "relative_position_values": _values},
        ),
    ),
)
class RelativePositional(Positional):
    """Shaw et al. 2018: self-attention's score of query i and key j is
    q_i (k_j + a^K_ij)^T / sqrt(Dh), and its output z_i = sum_j alpha_ij (v_j + a^V_ij),
    with a^K_ij = w^K[clip(j - i, -k, k)] and a^V_ij = w^V[clip(j - i, -k, k)] learned per
    layer (each layer's RelativeTables). No position embeddings and no length limit."""

    def __init__(self, d_model: int, d_head: int, max_positions: int, base: float) -> None:
        super().__init__(d_model, d_head, max_positions, base)
        self.d_head = d_head
        self._rows: PerShape[torch.Tensor] = PerShape()

    def layer_part(self, causal: bool) -> RelativeTables:
        return RelativeTables(self.d_head)

    def rows(self, n_queries: int, n_keys: int, offset: int, device: torch.device) -> torch.Tensor:
        """The table row of each (query, key), clip(j - i, -k, k) + k: (Tq, Tk)."""
        key = (n_queries, n_keys, offset, device)
        return self._rows.get(
            key,
            lambda: relative_positions(n_queries, n_keys, offset, device).clamp(-CLIP, CLIP) + CLIP,
        )

    def attention_bias(
        self, q: torch.Tensor, n_keys: int, offset: int, part: nn.Module | None = None
    ) -> torch.Tensor:
        """q_i a^K_ij / sqrt(Dh), (B, H, Tq, Tk): q against each row once (B, H, Tq, 2k+1),
        then gathered by distance."""
        rows = self.rows(q.shape[-2], n_keys, offset, q.device)
        by_row = torch.matmul(q, part.keys.to(q.dtype).t()) / q.shape[-1] ** 0.5
        return by_row.gather(-1, rows.expand(*q.shape[:2], -1, -1))

    def attention_values(
        self, n_queries: int, n_keys: int, offset: int, part: nn.Module | None = None
    ) -> Callable[[torch.Tensor], torch.Tensor]:
        """sum_j alpha_ij a^V_ij: the probabilities summed per row (B, H, Tq, 2k+1), P, then
        P w^V."""
        values = part.values

        def term(weights: torch.Tensor) -> torch.Tensor:
            rows = self.rows(n_queries, n_keys, offset, weights.device)
            by_row = weights.new_zeros(*weights.shape[:-1], ROWS)
            by_row = by_row.scatter_add(-1, rows.expand_as(weights), weights)
            return torch.matmul(by_row, values.to(weights.dtype))

        return term
