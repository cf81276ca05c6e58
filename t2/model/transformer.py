"""The encoder-decoder Transformer of Vaswani et al. 2017 (arXiv:1706.03762), assembled
from registered components, with a key/value cache for incremental decoding."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from t2.model.codepath import code_path
from t2.model.config import ModelConfig
from t2.model.flex import BlockMasks, flex_wanted
from t2.model.fused import Dropout
from t2.model.init import initialise
from t2.model.kvcache import KVCache
from t2.model.layers import DecoderLayer, EncoderLayer
from t2.model.loss import projected_cross_entropy
from t2.model.norm import build_norm
from t2.model.packing import Packing
from t2.model.positional import build_positional

Tensor = torch.Tensor


@dataclass
class DecoderState:
    """What incremental decoding keeps between steps: per-layer self-attention keys and
    values of the prefix, cross-attention keys and values of the source (computed once),
    and the number of target positions already decoded."""

    self_caches: list[KVCache]
    cross_caches: list[KVCache]
    offset: int = 0

    @classmethod
    def empty(cls, n_layers: int, capacity: int = 16) -> DecoderState:
        """Caches for `n_layers` layers whose self-attention buffers first hold `capacity`
        positions (they double when a longer prefix comes)."""
        selfs = [KVCache(capacity=capacity) for _ in range(n_layers)]
        return cls(selfs, [KVCache() for _ in range(n_layers)])

    def reorder(self, index: Tensor, sources: Tensor | None = None) -> None:
        """Keep target rows `index` of the self-attention caches and source rows `sources`
        (default: `index`) of the cross-attention caches. Beam search reorders the
        hypotheses after every step and keeps one source row per sentence for its beams."""
        for cache in self.self_caches:
            cache.reorder(index)
        for cache in self.cross_caches:
            cache.reorder(index if sources is None else sources)


class Transformer(nn.Module):
    """Encoder-decoder with a shared vocabulary; embeddings scaled by sqrt(d_model)."""

    def __init__(self, cfg: ModelConfig, pad_id: int = 0) -> None:
        super().__init__()
        self.cfg, self.pad_id = cfg, pad_id
        V, D = cfg.vocab_size, cfg.d_model  # noqa: N806
        self.src_embed = nn.Embedding(V, D, padding_idx=pad_id)
        # tie_embeddings: all = source, target and output share one matrix (the paper);
        # decoder = target input and output share; none = three separate matrices.
        self.tgt_embed = self.src_embed if cfg.tie_embeddings == "all" else nn.Embedding(V, D)
        self.output = None if cfg.tie_embeddings != "none" else nn.Linear(D, V, bias=False)
        self.positional = build_positional(
            cfg.positional, D, cfg.d_head, cfg.max_positions, cfg.rope_base
        )
        self.embed_dropout = Dropout(cfg.dropout)
        self.encoder = nn.ModuleList(
            EncoderLayer(cfg, self.positional) for _ in range(cfg.n_encoder_layers)
        )
        self.decoder = nn.ModuleList(
            DecoderLayer(cfg, self.positional) for _ in range(cfg.n_decoder_layers)
        )
        pre = cfg.norm_position == "pre"  # pre-norm stacks end with a final norm
        self.encoder_norm = build_norm(cfg.norm, D, cfg.norm_eps) if pre else nn.Identity()
        self.decoder_norm = build_norm(cfg.norm, D, cfg.norm_eps) if pre else nn.Identity()
        initialise(self, cfg)

    def _embed(self, embedding: nn.Embedding, ids: Tensor, offset: int) -> Tensor:
        x = embedding(ids) * math.sqrt(self.cfg.d_model)  # (B, T, D)
        return self.embed_dropout(self.positional.embed(x, offset))

    @property
    def max_length(self) -> int | None:
        """The longest sequence the positional scheme encodes (None: no limit)."""
        return self.positional.max_length

    def encode(
        self,
        src: Tensor,
        src_pad: Tensor | None = None,
        packing: Packing | None = None,
        masks: BlockMasks | None = None,
    ) -> Tensor:
        """src: (B, S) token ids -> memory (B, S, D), or its real positions (N, D) with
        their `packing` (t2.model.packing); `masks`: the pass's block masks (t2.model.flex)."""
        if src_pad is None:
            src_pad = src.eq(self.pad_id)
        x = self._embed(self.src_embed, src, 0)
        x = x if packing is None else packing.pack(x)
        for layer in self.encoder:
            x = layer(x, src_pad, self.positional, packing, masks)
        return self.encoder_norm(x)

    def decode(
        self,
        tgt_in: Tensor,  # (B, T): BOS + target prefix, or only the newest token with a state
        memory: Tensor,  # (B / g, S, D)
        src_pad: Tensor,  # (B / g, S), True at padding
        state: DecoderState | None = None,
    ) -> Tensor:
        """Logits (B, T, V) of the next token at each target position. Each source row may
        serve g consecutive target rows (beam search's beams of one sentence)."""
        return self.project(self.decoder_states(tgt_in, memory, src_pad, state))

    def decoder_states(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        src_pad: Tensor,
        state: DecoderState | None = None,
        packing: Packing | None = None,
        memory_packing: Packing | None = None,
        masks: BlockMasks | None = None,
    ) -> Tensor:
        """The decoder's output (B, T, D) before the output projection; as `decode`. With
        packings (teacher forcing only) the target's real positions (N, D), from packed
        memory; `masks` as `encode`'s."""
        offset = state.offset if state is not None else 0
        x = self._embed(self.tgt_embed, tgt_in, offset)
        x = x if packing is None else packing.pack(x)
        for i, layer in enumerate(self.decoder):
            self_cache = state.self_caches[i] if state is not None else None
            cross_cache = state.cross_caches[i] if state is not None else None
            x = layer(
                x,
                memory,
                src_pad,
                self.positional,
                self_cache,
                cross_cache,
                offset,
                packing,
                memory_packing,
                masks,
            )
        if state is not None:
            state.offset += tgt_in.shape[1]
        return self.decoder_norm(x)

    @property
    def output_weight(self) -> Tensor:
        """The output projection's (V, D) matrix (the target embedding's when tied)."""
        return self.output.weight if self.output is not None else self.tgt_embed.weight

    def project(self, h: Tensor) -> Tensor:
        return F.linear(h, self.output_weight)

    def forward(
        self,
        src: Tensor,
        tgt_in: Tensor,
        target: Tensor | None = None,
        smoothing: float = 0.0,
        grad_scale: Tensor | float | None = None,
        padded_attention: str = "sdpa",
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Teacher-forced logits (B, T, V); src (B, S) and tgt_in (B, T) are padded ids.

        With `target` (B, T), the label-smoothed loss summed over its real tokens and their
        count instead (t2.model.loss.projected_cross_entropy, with `grad_scale`): training
        on a CPU then never holds the (tokens x vocabulary) logits whole, and its
        position-wise layers skip the padding (t2.model.packing). `padded_attention`
        (train.padded_attention): `flex` runs the compiled CUDA pass's masked attention
        on FlexAttention, its block masks built once here for every layer (t2.model.flex).
        """
        src_pad = src.eq(self.pad_id)
        masks = BlockMasks() if flex_wanted(padded_attention, src) else None
        if target is None:
            memory = self.encode(src, src_pad, None, masks)
            return self.project(self.decoder_states(tgt_in, memory, src_pad, None, masks=masks))
        sources = targets = None
        if self.packs(src):
            sources = Packing.of(src_pad)  # encoder and cross-attention mask padding keys
            targets = Packing.of(self._trailing_padding(tgt_in, target))
            target = targets.pack(target)
        memory = self.encode(src, src_pad, sources, masks)
        h = self.decoder_states(tgt_in, memory, src_pad, None, targets, sources, masks)
        return projected_cross_entropy(
            h, self.output_weight, target, self.pad_id, smoothing, grad_scale
        )

    def _trailing_padding(self, tgt_in: Tensor, target: Tensor) -> Tensor:
        """(B, T), True past each row's last position whose input or target is a token:
        the decoder's causal self-attention masks no padding, so a padding position before
        a real one is a key like any other and stays in."""
        real = tgt_in.ne(self.pad_id) | target.ne(self.pad_id)
        positions = torch.arange(1, real.shape[1] + 1, device=real.device)
        ends = (real * positions).amax(1, keepdim=True)  # 1 + the last real position
        return positions > ends

    def packs(self, src: Tensor) -> bool:
        """Whether teacher forcing runs on packed states: on a CPU (measured there,
        docs/performance.md), not compiled (packing's shapes vary with every batch)."""
        return code_path(src) == "cpu" and not torch.compiler.is_compiling()

    def new_state(self, capacity: int = 16) -> DecoderState:
        """An empty decoding state; `capacity`: the longest prefix expected (BOS included)."""
        return DecoderState.empty(len(self.decoder), capacity)
