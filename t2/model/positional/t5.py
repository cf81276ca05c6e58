"""T5's bucketed relative position bias, Raffel et al. 2020 (arXiv:1910.10683), section 2.1."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from t2.facts import Ct2, PositionalFacts
from t2.model.positional import PerShape, Positional, relative_positions
from t2.registry import POSITIONAL

# T5's: 32 buckets, logarithmically wider up to a distance of 128, beyond which all share one
BUCKETS, MAX_DISTANCE = 32, 128


def t5_buckets(relative: torch.Tensor, bidirectional: bool) -> torch.Tensor:
    """The bucket of each relative position j - i, as T5's code (mesh_tensorflow's
    _relative_position_bucket, transformers' T5Attention): bidirectional (the encoder),
    half the buckets for keys after the query, half for the rest; causal (the decoder),
    all for the distance back, i - j >= 0. Of the n buckets of a side, distances under n/2
    have one each, the larger ones n/2 + floor(n/2 * log(d / (n/2)) / log(128 / (n/2))),
    at most n - 1."""
    n = BUCKETS
    if bidirectional:
        n //= 2
        bucket, distance = (relative > 0).long() * n, relative.abs()
    else:
        bucket, distance = torch.zeros_like(relative), (-relative).clamp(min=0)
    exact = n // 2
    scaled = torch.log(distance.float().clamp(min=1) / exact) / math.log(MAX_DISTANCE / exact)
    logarithmic = (exact + (scaled * (n - exact)).long()).clamp(max=n - 1)
    return bucket + torch.where(distance < exact, distance, logarithmic)


class T5Bias(nn.Module):
    """A stack's learned scalar per bucket and head, (buckets, H), drawn from N(0, 1/d_model)
    as transformers draws T5's."""

    def __init__(self, n_heads: int, d_model: int, causal: bool) -> None:
        super().__init__()
        self.causal = causal
        self.weight = nn.Parameter(torch.randn(BUCKETS, n_heads) / math.sqrt(d_model))


def _bias(cfg: object, part: T5Bias) -> torch.Tensor:
    return part.weight.detach()


def _max_distance(cfg: object, part: T5Bias) -> np.int32:
    return np.int32(MAX_DISTANCE)  # the spec's type


@POSITIONAL.register(
    "t5",
    PositionalFacts(
        order=True,
        summary="self-attention's scores biased by a learned scalar per log-bucketed distance",
        params=lambda d_model, max_positions: 0,
        layer_params=lambda d_head, n_heads: BUCKETS * n_heads,  # one table a stack, shared
        # the bias of every layer of each stack, as T5's converter writes it
        ct2=Ct2(
            {"relative_attention_bias": True},
            {
                "relative_attention_bias": _bias,
                "relative_attention_max_distance": _max_distance,
            },
        ),
    ),
)
class T5Positional(Positional):
    """Raffel et al. 2020: no position embeddings; self-attention's score of query i and key
    j gets b[bucket(j - i), h], a learned scalar per head, with bidirectional buckets in the
    encoder and causal ones in the decoder; one table per stack, shared by its layers (T5
    computes it in the first layer and passes it on). t2 keeps the scores' 1/sqrt(Dh),
    which T5 folds into its initialisation. No length limit."""

    def __init__(self, d_model: int, d_head: int, max_positions: int, base: float) -> None:
        super().__init__(d_model, d_head, max_positions, base)
        self.d_model, self.n_heads = d_model, d_model // d_head
        self._stacks: dict[bool, T5Bias] = {}  # the layers own them (a plain dict)
        self._buckets: PerShape[torch.Tensor] = PerShape()

    def layer_part(self, causal: bool) -> T5Bias:
        """The stack's table: made for its first layer, the same one for the others."""
        if causal not in self._stacks:
            self._stacks[causal] = T5Bias(self.n_heads, self.d_model, causal)
        return self._stacks[causal]

    def attention_bias(
        self, q: torch.Tensor, n_keys: int, offset: int, part: nn.Module | None = None
    ) -> torch.Tensor:
        key = (q.shape[-2], n_keys, offset, part.causal, q.device)

        def buckets() -> torch.Tensor:
            relative = relative_positions(q.shape[-2], n_keys, offset, q.device)
            return t5_buckets(relative, not part.causal)

        return part.weight[self._buckets.get(key, buckets)].permute(2, 0, 1)[None]  # (1, H, Tq, Tk)
