"""Residual connections in a CTranslate2 export (t2.serve.ct2), folded into the weights.

CTranslate2 joins a sublayer to the stream as y + g(y) (then normalises, post-norm). A
connection of t2.model.residual that is a x + b f(x) (its `coefficients`, scalars or
per-channel vectors) maps onto that exactly, with no option of CTranslate2's:

- b goes into the matrix that writes the sublayer's output, attention's output projection
  or the feed-forward's last: b f(x) = (diag(b) W) h + b * bias (LayerScale's lambda).
- a (DeepNorm's alpha; post-norm only) goes into the stream itself: CTranslate2 carries
  y_k = a_k x_k into sublayer k, where x_k is t2's. The embeddings and the position table
  are scaled by the stack's first a; the matrices that read the stream are divided by a_k,
  so g(y_k) = f(x_k) and y_k + g(y_k) = a_k x_k + f(x_k), what t2's norm sees; and each
  norm's gain and bias are scaled by the next sublayer's a, 1 after the stack's last, whose
  output (the encoder's memory, the decoder's states) is then t2's own.

Folding alpha into the sublayer instead, LN(alpha x + f) = LN(x + f / alpha) with an
epsilon of eps / alpha^2, would need an epsilon for each stack: CTranslate2 has one a model.
A pre-norm sublayer normalises the stream it reads, so a scaled stream would not cancel:
a != 1 there is refused. A connection with a = b = 1 (plain) changes no weight.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from t2.errors import ExportError
from t2.model.residual import Connection

Tensor = torch.Tensor


@dataclass(frozen=True)
class SublayerSpec:
    """The specs of one residual sublayer: the linear layers that read the stream, the one
    that writes the sublayer's output, and the norm after the sum (post-norm) or before
    the sublayer (pre-norm)."""

    reads: Sequence[Any]
    writes: Any
    norm: Any


def _is_one(x: Tensor) -> bool:
    return bool(torch.all(x == 1))


def _scaled(spec: Any, name: str, factor: Tensor) -> None:
    """spec.name times `factor` (broadcast over its rows), as a new tensor: the model's own
    weights, which the spec may hold, stay unchanged."""
    value = getattr(spec, name, None)
    if isinstance(value, Tensor):
        setattr(spec, name, value * factor.to(value.dtype))


def fold_stack(
    entry: Sequence[tuple[Any, str]],
    sublayers: Sequence[SublayerSpec],
    connections: Sequence[Connection],
    pre: bool,
    key: str,
) -> None:
    """Fold a stack's connections (in the stream's order, one per sublayer spec) into its
    specs; `entry`: the (spec, attribute) pairs that put the stream in (embeddings, the
    position table). `key`: the config value that names the connection, for errors."""
    try:
        coefficients = [c.coefficients() for c in connections]
    except NotImplementedError:
        raise ExportError(
            f"model.residual={key!r} is not a x + b f(x) (no coefficients); give its facts a "
            f"Ct2 unexpressed reason, or its class a coefficients method"
        ) from None
    scales = [a.float() for a, _ in coefficients]
    if any(not _is_one(a) for a in scales):
        if pre:
            raise ExportError(
                f"model.residual={key!r} scales the stream before pre-norm sublayers, which "
                f"CTranslate2 cannot express; export a post-norm run"
            )
        if any(bool(torch.any(a == 0)) for a in scales):
            raise ExportError(f"model.residual={key!r} has a zero scale on the stream; retrain")
        for spec, name in entry:
            _scaled(spec, name, scales[0])
    for k, (spec, (_, b)) in enumerate(zip(sublayers, coefficients, strict=True)):
        after = scales[k + 1] if k + 1 < len(scales) else torch.tensor(1.0)
        if not _is_one(scales[k]):
            for linear in spec.reads:
                _scaled(linear, "weight", 1 / scales[k])  # (out, in): a column's factor
        if not _is_one(b):
            _scaled(spec.writes, "weight", b.float()[..., None] if b.dim() else b.float())
            _scaled(spec.writes, "bias", b.float())
        if not _is_one(after):
            _scaled(spec.norm, "gamma", after)
            _scaled(spec.norm, "beta", after)
