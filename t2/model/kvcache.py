"""The key/value cache of one attention layer for incremental decoding: the keys and values
of the prefix (self-attention) or of the source (cross-attention), with their key/value
heads only (model.n_kv_heads)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

Tensor = torch.Tensor


@dataclass
class KVCache:
    """Keys and values of one attention layer, (B, Hkv, T, Dh), grown in place while decoding."""

    k: Tensor | None = None
    v: Tensor | None = None
    length: int = 0
    capacity: int = 16  # positions of the first buffer (a search knows its maximum length)
    spare: tuple[Tensor, Tensor] | None = None  # buffers a reorder left, reused by the next

    def append(self, k: Tensor, v: Tensor, multiple: int = 1) -> tuple[Tensor, Tensor]:
        """Append and return the keys and values so far, their length rounded up to a
        `multiple` (within the buffer); the positions past `length` are zeroed (a masked
        key's weight is 0, and 0 times whatever a fresh buffer held could be NaN)."""
        new = self.length + k.shape[-2]
        if self.k is None or new > self.k.shape[-2]:  # grow by doubling, amortised O(1)
            capacity = max(2 * new, self.capacity)
            shape = (*k.shape[:-2], capacity, k.shape[-1])
            big_k, big_v = k.new_empty(shape), v.new_empty(shape)
            if self.k is not None:
                big_k[..., : self.length, :] = self.k[..., : self.length, :]
                big_v[..., : self.length, :] = self.v[..., : self.length, :]
            self.k, self.v = big_k, big_v
        self.k[..., self.length : new, :] = k
        self.v[..., self.length : new, :] = v
        self.length = new
        end = min(-(-new // multiple) * multiple, self.k.shape[-2])
        if end > new:
            self.k[..., new:end, :].zero_()
            self.v[..., new:end, :].zero_()
        return self.k[..., :end, :], self.v[..., :end, :]

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows `index`; only the filled part of the buffers is copied, straight
        into the buffers the previous reorder freed when the batch keeps its size (beam
        search after every step): fresh ones would cost a page fault per 4 KiB."""
        if self.k is None:
            return
        n = self.length
        if torch.is_grad_enabled() and (self.k.requires_grad or self.v.requires_grad):
            self.k, self.v = (x[..., :n, :].index_select(0, index) for x in (self.k, self.v))
            self.spare = None  # out= has no autograd, and saved views must stay unchanged
            return
        shape = (len(index), *self.k.shape[1:])
        if self.spare is None or self.spare[0].shape != shape:
            self.spare = (self.k.new_empty(shape), self.v.new_empty(shape))
        k, v = self.spare
        torch.index_select(self.k[..., :n, :], 0, index, out=k[..., :n, :])
        torch.index_select(self.v[..., :n, :], 0, index, out=v[..., :n, :])
        self.spare = (self.k, self.v) if self.k.shape == shape else None
        self.k, self.v = k, v
