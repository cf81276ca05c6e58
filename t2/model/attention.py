"""Multi-head attention (Vaswani et al. 2017, section 3.2) over swappable kernels
(t2.model.kernels) and a key/value cache for incremental decoding. Self-attention takes
its positional scheme's rotation of q and k and its additive bias (ALiBi's); cross-attention
takes neither (the reason is in t2.model.positional)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from t2.model.kernels import attention_weights
from t2.model.packing import Packing
from t2.model.positional import Positional
from t2.registry import ATTENTION

Tensor = torch.Tensor


# On a CPU, 16-bit matrix products run as oneDNN kernels compiled per shape, each keeping
# ~0.6 MiB (docs/serving.md): a beam search's single-query attention over every key length
# 1..T and every live row count made 1,024 shapes, +669 MiB. Decoding therefore rounds the
# lengths it controls up to a multiple of SHAPE_MULTIPLE, the extra positions masked:
# self-attention's keys over the cache (here) and the source batch (t2.decoding.search).
SHAPE_MULTIPLE = 8


def per_shape_kernels(t: Tensor) -> bool:
    """Whether products of `t` run as kernels compiled per shape (16 bits on a CPU)."""
    return t.device.type == "cpu" and t.dtype in (torch.bfloat16, torch.float16)


@dataclass
class KVCache:
    """Keys and values of one attention layer, (B, H, T, Dh), grown in place while decoding."""

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


@contextlib.contextmanager
def record_attention(model: nn.Module) -> Iterator[dict[str, list[Tensor]]]:
    """Inside the block every attention layer of `model` runs the explicit formula and
    appends its probabilities (B, H, Tq, Tk) to records[its module name], once per call;
    the kernels are put back on leaving. Outside it nothing is recorded and nothing costs
    more: the layers call their own kernel as always."""
    records: dict[str, list[Tensor]] = {}
    layers = [(n, m, m.kernel) for n, m in model.named_modules() if isinstance(m, _Attention)]
    for name, module, _ in layers:
        module.kernel = _recording_kernel(records.setdefault(name, []))
    try:
        yield records
    finally:
        for _, module, kernel in layers:
            module.kernel = kernel


def _recording_kernel(sink: list[Tensor]) -> Callable[..., Tensor]:
    def kernel(
        q: Tensor,
        k: Tensor,
        v: Tensor,
        key_padding: Tensor | None,
        causal: bool,
        dropout_p: float,
        bias: Tensor | None = None,
    ) -> Tensor:
        weights = attention_weights(q, k, key_padding, causal, bias)
        sink.append(weights.detach())
        return torch.einsum("bhqk,bhkd->bhqd", F.dropout(weights, p=dropout_p), v)

    return kernel


class _Attention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, dropout: float, bias: bool, kernel: str):
        super().__init__()
        self.n_heads = n_heads
        self.dropout = dropout
        self.kernel = ATTENTION.get(kernel)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def _attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        pad: Tensor | None,
        causal: bool,
        group: int = 1,
        packing: Packing | None = None,
        bias: Tensor | None = None,
    ) -> Tensor:
        """Attention of q (B * group, H, Tq, Dh) over k, v (B, H, Tk, Dh): `group`
        consecutive query rows share one row of keys and values. With the queries'
        `packing`, the output is packed to their real positions before the projection.
        `bias` (self-attention only, group 1) is added to the scores."""
        p = self.dropout if self.training else 0.0
        q = rearrange(q, "(b g) h t d -> b h (g t) d", g=group)
        out = self.kernel(q, k, v, pad, causal, p, bias)  # (B, H, group * Tq, Dh)
        out = rearrange(out, "b h (g t) d -> (b g) t (h d)", g=group)
        return self.out_proj(out if packing is None else packing.pack(out))


class SelfAttention(_Attention):
    """Multi-head self-attention; rotary positions (if any) rotate q and k before caching."""

    fused = {"qkv": 3}  # fused projections, initialised per d_model x d_model block

    def __init__(self, d_model: int, n_heads: int, dropout: float, bias: bool, kernel: str):
        super().__init__(d_model, n_heads, dropout, bias, kernel)
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)

    def values_and_output(self) -> list[Tensor]:
        """The matrices that make what attention writes (not where it reads): the value
        rows of the fused projection and the output projection (DeepNorm scales them)."""
        return [self.qkv.weight.chunk(3, dim=0)[2], self.out_proj.weight]

    def forward(
        self,
        x: Tensor,  # (B, T, D)
        key_padding: Tensor | None,
        causal: bool,
        positional: Positional,
        cache: KVCache | None = None,
        offset: int = 0,
        packing: Packing | None = None,
    ) -> Tensor:
        """x: (B, T, D), or its real positions (N, D) with their `packing`."""
        qkv = self.qkv(x) if packing is None else packing.unpack(self.qkv(x))
        qkv = rearrange(qkv, "b t (n h d) -> n b h t d", n=3, h=self.n_heads)
        q, k, v = positional.rotate_qkv(qkv, offset).unbind(0)
        if cache is not None:
            one_query = q.shape[-2] == 1
            multiple = SHAPE_MULTIPLE if one_query and per_shape_kernels(q) else 1
            k, v = cache.append(k, v, multiple)
            causal = causal and not one_query  # one new query sees the whole prefix
            if k.shape[-2] > cache.length:  # the rounded-up tail: masked as padding
                tail = torch.arange(k.shape[-2], device=k.device) >= cache.length
                key_padding = (
                    tail.expand(k.shape[0], -1)
                    if key_padding is None
                    else (F.pad(key_padding, (0, k.shape[-2] - key_padding.shape[-1]), value=True))
                )
        bias = positional.attention_bias(q.shape[-2], k.shape[-2], offset, q.device)
        return self._attend(q, k, v, key_padding, causal, packing=packing, bias=bias)


class CrossAttention(_Attention):
    """Encoder-decoder attention; keys and values of the source are computed once per source.

    The query batch may be a multiple of the source batch: `group` consecutive query rows
    (beam search's beams of one sentence) then attend to one source row as `group` x Tq
    queries, so its keys and values are neither copied per beam nor read once per beam."""

    fused = {"kv": 2}

    def __init__(self, d_model: int, n_heads: int, dropout: float, bias: bool, kernel: str):
        super().__init__(d_model, n_heads, dropout, bias, kernel)
        self.q = nn.Linear(d_model, d_model, bias=bias)
        self.kv = nn.Linear(d_model, 2 * d_model, bias=bias)

    def values_and_output(self) -> list[Tensor]:
        """As SelfAttention's: the value rows of [k; v] and the output projection."""
        return [self.kv.weight.chunk(2, dim=0)[1], self.out_proj.weight]

    def forward(
        self,
        x: Tensor,  # (B * group, Tq, D)
        memory: Tensor,  # (B, S, D)
        key_padding: Tensor | None,
        cache: KVCache | None = None,
        packing: Packing | None = None,
        memory_packing: Packing | None = None,
    ) -> Tensor:
        """x and memory may come packed (N, D), with their packings (no cache then)."""
        q = self.q(x) if packing is None else packing.unpack(self.q(x))
        q = rearrange(q, "b t (h d) -> b h t d", h=self.n_heads)
        if cache is not None and cache.k is not None:
            k, v = cache.k, cache.v
        else:
            kv = self.kv(memory)
            kv = kv if memory_packing is None else memory_packing.unpack(kv)
            k, v = rearrange(kv, "b s (n h d) -> n b h s d", n=2, h=self.n_heads)
            if cache is not None:  # contiguous once, not copied by the kernel at every step
                k, v = k.contiguous(), v.contiguous()
                cache.k, cache.v, cache.length = k, v, k.shape[-2]
        group = q.shape[0] // k.shape[0]
        if group * k.shape[0] != q.shape[0]:
            raise ValueError(f"{q.shape[0]} query rows are not a multiple of {k.shape[0]} sources")
        return self._attend(q, k, v, key_padding, False, group, packing)
