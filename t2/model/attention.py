"""Multi-head attention (Vaswani et al. 2017, section 3.2) over swappable kernels
(t2.model.kernels) and a key/value cache for incremental decoding. Self-attention takes
its positional scheme's rotation of q and k, its additive bias (ALiBi's, T5's, Shaw's keys)
and its term of the probabilities (Shaw's values); cross-attention takes none of them (the
reason is in t2.model.positional).

Every attention layer may have fewer key/value heads than query heads (model.n_kv_heads):
multi-query attention (one, Shazeer 2019) or grouped-query attention (a divisor of the
heads, Ainslie et al. 2023), in the encoder too, as Shazeer replaced every attention
layer (Ainslie et al. group the decoder's only). The projections and the decoding cache
then hold only the key/value heads.

QK-norm (model.qk_norm; Dehghani et al. 2023, section 3.1, after Henry et al. 2020)
normalises each head's queries and keys over Dh before their dot product (and before a
rotary scheme rotates them): one norm of model.norm's kind for the queries and one for the
keys of a layer, their gain (and LayerNorm's bias) of Dh shared by the heads. The scores
keep their 1/sqrt(Dh): the paper's LayerNorm, with the norms' learned gains as the
temperature (Henry et al.'s form, an L2 norm with one learned scale, is QK-norm over
ScaleNorm). t2's layers normalise self-attention, as Dehghani et al. (a ViT has no other)
and the language models that adopted it (OLMo 2, Qwen3, Gemma 3) do; cross-attention can
take the norms too, but keeps none: CTranslate2 normalises a cross-attention's queries over
the whole width, not per head, so the model would not export."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from t2.model.flex import BlockMasks, flex_attention_masked
from t2.model.kernels import Values, attention_weights, kernel_named, repeat_kv, weighted_values
from t2.model.kvcache import KVCache
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
        values: Values | None = None,
    ) -> Tensor:
        weights = attention_weights(q, k, key_padding, causal, bias)
        sink.append(weights.detach())
        return weighted_values(F.dropout(weights, p=dropout_p), v, values)

    return kernel


def _masked(q: Tensor, k: Tensor, pad: Tensor | None, causal: bool, bias: Tensor | None) -> bool:
    """Whether an attention needs a mask or a bias: padding, a bias, or causal with fewer
    queries than keys (SDPA's flash kernel takes only the rest)."""
    return bias is not None or pad is not None or (causal and q.shape[-2] != k.shape[-2])


class _Attention(nn.Module):
    """What both attentions share: the heads, the kernel, QK-norm and the output projection.
    `qk_norm` makes the norm of one head's queries or keys (QK-norm), or is None;
    `positions` is the positional scheme's own part of a self-attention layer
    (Positional.layer_part), None in cross-attention."""

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        dropout: float,
        bias: bool,
        kernel: str,
        n_kv_heads: int = 0,
        qk_norm: Callable[[], nn.Module] | None = None,
        positions: nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads or n_heads
        self.d_kv = self.n_kv_heads * d_model // n_heads  # the keys' (and values') width
        self.dropout = dropout
        self.kernel = kernel_named(kernel)
        self.grouped = ATTENTION.facts(kernel).grouped  # else k, v repeated per query head
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.fused = self._project_in(d_model, bias)
        self.q_norm = None if qk_norm is None else qk_norm()
        self.k_norm = None if qk_norm is None else qk_norm()
        self.positions = positions

    def _project_in(self, d_model: int, bias: bool) -> dict[str, list[int]]:
        """Make the input projections; returns the fused ones' blocks (rows each), which
        t2.model.init initialises apart."""
        raise NotImplementedError

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
        masks: BlockMasks | None = None,
        values: Values | None = None,
    ) -> Tensor:
        """Attention of q (B * group, H, Tq, Dh) over k, v (B, Hkv, Tk, Dh): `group`
        consecutive query rows share one row of keys and values. With the queries'
        `packing`, the output is packed to their real positions before the projection.
        `bias` and `values` (self-attention only, group 1) are a positional scheme's. With
        the forward pass's block `masks` (train.padded_attention=flex), a masked attention
        without dropout or a values term runs FlexAttention instead of the layer's kernel."""
        p = self.dropout if self.training else 0.0
        q = rearrange(q, "(b g) h t d -> b h (g t) d", g=group)
        if k.shape[-3] != q.shape[-3] and not self.grouped:
            k, v = repeat_kv(k, v, q.shape[-3])
        flex = masks is not None and p == 0.0 and values is None
        if flex and _masked(q, k, pad, causal, bias):
            name = f"{type(self).__name__}{'-causal' if causal else ''}"
            out = flex_attention_masked(q, k, v, masks.get(name, q, k, pad, causal), bias)
        elif values is None:  # a kernel's interface without the values term (plugins')
            out = self.kernel(q, k, v, pad, causal, p, bias)  # (B, H, group * Tq, Dh)
        else:
            out = self.kernel(q, k, v, pad, causal, p, bias, values)
        out = rearrange(out, "b h (g t) d -> (b g) t (h d)", g=group)
        return self.out_proj(out if packing is None else packing.pack(out))


class SelfAttention(_Attention):
    """Multi-head self-attention; rotary positions (if any) rotate q and k before caching."""

    def _project_in(self, d_model: int, bias: bool) -> dict[str, list[int]]:
        self.qkv = nn.Linear(d_model, d_model + 2 * self.d_kv, bias=bias)
        return {"qkv": [d_model, self.d_kv, self.d_kv]}

    def _project(
        self, x: Tensor, positional: Positional, offset: int, packing: Packing | None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """q (B, H, T, Dh), k and v (B, Hkv, T, Dh): normalised, then rotated."""
        qkv = self.qkv(x) if packing is None else packing.unpack(self.qkv(x))
        if self.q_norm is None and self.n_kv_heads == self.n_heads:
            # one (q, k, v) buffer, rotated in one pass (t2.model.fused)
            qkv = rearrange(qkv, "b t (n h d) -> n b h t d", n=3, h=self.n_heads)
            return positional.rotate_qkv(qkv, offset).unbind(0)
        d_q = qkv.shape[-1] - 2 * self.d_kv
        q, k, v = qkv.split([d_q, self.d_kv, self.d_kv], dim=-1)
        q = rearrange(q, "b t (h d) -> b h t d", h=self.n_heads)
        k, v = (rearrange(x, "b t (h d) -> b h t d", h=self.n_kv_heads) for x in (k, v))
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        return positional.rotate(q, offset), positional.rotate(k, offset), v

    def values_and_output(self) -> list[Tensor]:
        """The matrices that make what attention writes (not where it reads): the value
        rows of the fused projection (its last d_kv: q, k, v in that order, k and v at
        their width) and the output projection (DeepNorm scales them)."""
        return [self.qkv.weight[-self.d_kv :], self.out_proj.weight]

    def forward(
        self,
        x: Tensor,  # (B, T, D)
        key_padding: Tensor | None,
        causal: bool,
        positional: Positional,
        cache: KVCache | None = None,
        offset: int = 0,
        packing: Packing | None = None,
        masks: BlockMasks | None = None,
    ) -> Tensor:
        """x: (B, T, D), or its real positions (N, D) with their `packing`; `masks`: the
        forward pass's block masks, if its masked attention runs FlexAttention."""
        q, k, v = self._project(x, positional, offset, packing)
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
        n_keys = k.shape[-2]
        bias = positional.attention_bias(q, n_keys, offset, self.positions)
        values = positional.attention_values(q.shape[-2], n_keys, offset, self.positions)
        return self._attend(q, k, v, key_padding, causal, 1, packing, bias, masks, values)


class CrossAttention(_Attention):
    """Encoder-decoder attention; keys and values of the source are computed once per source.

    The query batch may be a multiple of the source batch: `group` consecutive query rows
    (beam search's beams of one sentence) then attend to one source row as `group` x Tq
    queries, so its keys and values are neither copied per beam nor read once per beam."""

    def _project_in(self, d_model: int, bias: bool) -> dict[str, list[int]]:
        self.q = nn.Linear(d_model, d_model, bias=bias)
        self.kv = nn.Linear(d_model, 2 * self.d_kv, bias=bias)
        return {"kv": [self.d_kv, self.d_kv]}

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
        masks: BlockMasks | None = None,
    ) -> Tensor:
        """x and memory may come packed (N, D), with their packings (no cache then);
        `masks` as SelfAttention's."""
        q = self.q(x) if packing is None else packing.unpack(self.q(x))
        q = rearrange(q, "b t (h d) -> b h t d", h=self.n_heads)
        q = q if self.q_norm is None else self.q_norm(q)
        if cache is not None and cache.k is not None:
            k, v = cache.k, cache.v
        else:
            kv = self.kv(memory)
            kv = kv if memory_packing is None else memory_packing.unpack(kv)
            k, v = rearrange(kv, "b s (n h d) -> n b h s d", n=2, h=self.n_kv_heads)
            k = k if self.k_norm is None else self.k_norm(k)
            if cache is not None:  # contiguous once, not copied by the kernel at every step
                k, v = k.contiguous(), v.contiguous()
                cache.k, cache.v, cache.length = k, v, k.shape[-2]
        group = q.shape[0] // k.shape[0]
        if group * k.shape[0] != q.shape[0]:
            raise ValueError(f"{q.shape[0]} query rows are not a multiple of {k.shape[0]} sources")
        return self._attend(q, k, v, key_padding, False, group, packing, masks=masks)
