"""What each kind of component declares about itself, beside its code (docs/components.md).

A component registers with its facts (`NORM.register("rmsnorm", NormFacts(...))`), and the
rest of t2 reads the facts instead of testing the component's name: the FLOPs count
(t2.model.flops) and the memory model (t2.model.summary) take their terms from them, the
CTranslate2 export (t2.serve.ct2) and its engine (t2.serve.ct2_engine) their mapping or
refusal, the sanity suite what a scheme cannot learn. A new component, built in or from a
plugin, brings its facts and needs no table elsewhere. This module imports nothing (the
registries on the config floor name these types), so a fact that needs torch or a model's
weights is a method of the component's class instead (Positional.added_table).

Counts are those of t2.model.flops and t2.model.summary: a matmul of (m x k) by (k x n)
costs 2mkn FLOPs; memory terms count the elements a token keeps for the backward pass, in
units of the activations' element size; elementwise work (norms, activations, rotations,
biases) is not counted (`uncounted`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


def uncounted(*sizes: int) -> int:
    """The FLOPs or memory term of elementwise work: none counted (the module's doc)."""
    return 0


def gated_hidden_size(d_ff: int, multiple_of: int = 8) -> int:
    """Hidden size of a gated FFN with the parameter count of an ungated one of size d_ff.

    A gated FFN has three d_model x hidden matrices instead of two, so hidden = 2/3 d_ff
    (Shazeer 2020), rounded to a multiple of 8 for efficient matrix kernels.
    """
    return max(multiple_of, multiple_of * round(2 * d_ff / 3 / multiple_of))


@dataclass(frozen=True)
class Ct2:
    """How CTranslate2 expresses a component, or the one line that says it cannot.

    `options`: for a model component, keyword arguments of both stacks' TransformerSpec
    (ctranslate2.specs' names; a callable value is called with the model's config, and
    `activation` names a member of common_spec.Activation); for a search strategy, the
    decode settings CTranslate2's search runs it with. `attention`: attributes of every
    self-attention spec, each made from the model's config and the layer's own part of the
    component (a positional scheme's Positional.layer_part: Shaw's tables, T5's bias; None
    where it keeps none). `unexpressed`: why CTranslate2 has no equivalent; the export (or
    the engine) refuses with it. Empty: expressible."""

    options: Mapping[str, Any] = field(default_factory=dict)
    attention: Mapping[str, Callable[[Any, Any], Any]] = field(default_factory=dict)
    unexpressed: str = ""


@dataclass(frozen=True)
class NormFacts:
    """A normalisation layer (model.norm): `params(d_model)`, its parameters (checked
    against the module when it is built); `saved(d_model)`, the elements a token keeps for
    the backward pass; `ct2`: CTranslate2's `rms_norm` (the weight goes in as gamma, a bias
    as beta). Norms are elementwise: no FLOPs term."""

    params: Callable[[int], int]
    saved: Callable[[int], float]
    ct2: Ct2


@dataclass(frozen=True)
class ResidualFacts:
    """A residual connection (model.residual): how a sublayer's output y joins the stream x
    (t2.model.residual). `params(d_model)`: its parameters in each sublayer; `normed`:
    whether the sublayer keeps model.norm (ReZero has none); `placements`: the
    model.norm_position values its formula is defined for (DeepNorm: post); `saved(d_model)`
    and `flops(d_model)`: the elements a token keeps for the backward pass and the matmul
    FLOPs a token costs in each sublayer; `ct2`: CTranslate2's options, or `unexpressed`
    (an expressible one is folded into the weights by its coefficients,
    t2.serve.ct2_residual)."""

    params: Callable[[int], int]
    normed: bool
    placements: tuple[str, ...]
    ct2: Ct2
    saved: Callable[[int], float] = uncounted
    flops: Callable[[int], int] = uncounted


@dataclass(frozen=True)
class FfnFacts:
    """A position-wise feed-forward network (model.ffn): `gated`, a GLU (act(x W) * (x V))
    W2 whose three matrices have 2/3 the hidden size (Shazeer 2020), else act(x W1) W2 with
    two of d_ff; `ct2`: CTranslate2's `activation` and `ffn_glu`. Sizes, parameters, FLOPs
    and memory follow (the methods); a variant of another shape overrides them."""

    gated: bool
    ct2: Ct2

    def hidden(self, d_ff: int) -> int:
        """The hidden size for model.d_ff (model.d_hidden)."""
        return gated_hidden_size(d_ff) if self.gated else d_ff

    def matrices(self) -> int:
        """The d_model x hidden matrices: W_gate, W_up, W2 or W1, W2."""
        return 3 if self.gated else 2

    def params(self, d_model: int, d_ff: int, bias: bool) -> int:
        hidden = self.hidden(d_ff)
        biases = (self.matrices() - 1) * hidden + d_model if bias else 0
        return self.matrices() * d_model * hidden + biases

    def flops(self, d_model: int, d_ff: int) -> int:
        """Forward matmul FLOPs a token."""
        return 2 * self.matrices() * d_model * self.hidden(d_ff)

    def saved(self, d_model: int, d_ff: int) -> float:
        """Elements a token keeps for the backward pass: 1.5 d_model for the input, then 2 a
        hidden unit, 4 for a GLU (checked against measured peaks by bench_memory)."""
        return 1.5 * d_model + self.hidden(d_ff) * (4 if self.gated else 2)


@dataclass(frozen=True)
class PositionalFacts:
    """A positional scheme (model.positional). `order`: whether the model sees token order
    (without it a task that depends on the source's order cannot be learned: the sanity
    suite expects those to fail); `summary`: how it gives positions, in a phrase;
    `params(d_model, max_positions)`: its parameters; `flops(s_q, s_k, d_model)` and
    `saved(s_q, s_k, n_heads)`: the matmul FLOPs and the elements of one sequence it adds
    to each self-attention layer; `layer_params(d_head, n_heads)`: the parameters of the part
    each self-attention layer keeps (Positional.layer_part; one shared by a stack's layers
    counts in each); `weights`: whether it adds a term of the attention probabilities to
    the output (Shaw's values), so that self-attention forms them (KernelFacts.values) and
    keeps them for the backward pass on every device; `ct2`: CTranslate2's options. Whether
    it adds a table to the embeddings (CTranslate2's position_encodings) its module says:
    Positional.added_table."""

    order: bool
    summary: str
    params: Callable[[int, int], int]
    ct2: Ct2
    flops: Callable[[int, int, int], int] = uncounted
    saved: Callable[[int, int, int], float] = uncounted
    layer_params: Callable[[int, int], int] = uncounted
    weights: bool = False


@dataclass(frozen=True)
class KernelFacts:
    """An attention kernel (model.attention): `fused`, whether on CUDA it keeps one
    log-sum-exp per query for the backward pass instead of the (Tq x Tk) weights (the
    memory model); `grouped`, whether it takes keys and values with fewer heads than the
    queries (model.n_kv_heads; otherwise attention repeats them to one per query head
    first); `values`, whether it takes a term of the probabilities added to its output
    (a positional scheme's whose facts say `weights`; otherwise such a model is refused
    when built). Every kernel computes the same function, so exports ignore it."""

    fused: bool
    grouped: bool = False
    values: bool = False


@dataclass(frozen=True)
class SearchFacts:
    """A search strategy (decode.search): `ct2`, the decode settings CTranslate2's engine
    runs it with, or why that engine cannot; `reads`, the decode keys of its own that its
    output depends on (those of every strategy, such as lenpen, are the decode section's),
    which results and model cards record."""

    ct2: Ct2
    reads: tuple[str, ...]
