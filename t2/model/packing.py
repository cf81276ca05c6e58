"""Position-wise layers over real tokens only: a padded batch's states packed to (N, D).

Every sublayer of a Transformer but attention is position-wise: the linear layers, the
norms, dropout and the residual sums see one position at a time. Run on a padded
(B, T, D) batch they also compute every padding position, whose results are never used.
`Packing` keeps the N real positions of a batch in a (N, D) tensor instead; attention,
the only part that needs the (B, T) layout, unpacks its projections into it (padding
positions zeroed: they are masked as keys, and their query rows are dropped again when
the output is packed). Training on a CPU runs this way (t2.model.transformer): the
padding the token-budget batcher leaves (~8% of positions on real text) is neither
multiplied nor normalised. Outputs at real positions are those of the padded layout.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

Tensor = torch.Tensor


@dataclass(frozen=True)
class Packing:
    """Which positions of a padded (B, T) batch are real tokens."""

    index: Tensor  # (N,) flat positions b * T + t of the real tokens, ascending
    padding: Tensor  # (B * T - N,) flat positions of the padding
    batch: int
    length: int

    @classmethod
    def of(cls, pad: Tensor) -> Packing:
        """The packing of a batch whose padding mask (B, T) is True at padding."""
        flat = pad.flatten()
        index, padding = (~flat).nonzero().squeeze(1), flat.nonzero().squeeze(1)
        return cls(index, padding, pad.shape[0], pad.shape[1])

    def pack(self, x: Tensor) -> Tensor:
        """(B, T, ...) -> (N, ...): the real positions, in order."""
        return x.reshape(self.batch * self.length, *x.shape[2:]).index_select(0, self.index)

    def unpack(self, x: Tensor) -> Tensor:
        """(N, ...) -> (B, T, ...), zero at padding."""
        return _Unpack.apply(x, self)


class _Unpack(torch.autograd.Function):
    """Writes the real rows into a new tensor and zeroes only the padding rows (zeroing
    the whole tensor first would be one more pass over it); the backward pass packs."""

    @staticmethod
    def forward(ctx, x: Tensor, packing: Packing) -> Tensor:  # type: ignore[override]
        ctx.packing = packing
        out = x.new_empty((packing.batch, packing.length, *x.shape[1:]))
        rows = out.view(packing.batch * packing.length, *x.shape[1:])
        rows.index_fill_(0, packing.padding, 0).index_copy_(0, packing.index, x)
        return out  # not a view: in-place ops on it stay allowed

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        return ctx.packing.pack(grad), None
