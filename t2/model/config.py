"""The model's section of the config (model.*): the architecture and its components, each
checked against its registry when the config is made."""

from __future__ import annotations

from dataclasses import dataclass

from t2.errors import ConfigError
from t2.registry import ATTENTION, FFN, NORM, POSITIONAL, RESIDUAL
from t2.section import Section, choice, component

# how the compiled CUDA pass runs a masked attention (train.padded_attention, t2.model.flex)
PADDED_ATTENTION = ("sdpa", "flex")


@dataclass(frozen=True)
class ModelConfig(Section):
    """Architecture: the paper's base model unless a recipe says otherwise."""

    SECTION = "model"

    vocab_size: int = 37000  # shared source/target BPE vocabulary; set from the tokenizer
    d_model: int = 512
    n_heads: int = 8
    # key/value heads (Shazeer 2019; Ainslie et al. 2023): 0 = one per query head; 1 =
    # multi-query; a divisor of n_heads = grouped-query, n_heads / n_kv_heads query heads a group
    n_kv_heads: int = 0
    d_ff: int = 2048  # gated FFNs use 2/3 of this (see d_hidden) to keep the parameter count
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    dropout: float = 0.1  # residual and embedding dropout
    attention_dropout: float = 0.0  # dropout on attention weights (the paper uses none)
    ffn_dropout: float = 0.0  # dropout on the FFN's hidden activations
    positional: str = component("sinusoidal", POSITIONAL)
    norm: str = component("layernorm", NORM)
    ffn: str = component("relu", FFN)
    attention: str = component("sdpa", ATTENTION)
    qk_norm: bool = False  # queries and keys normalised per head by model.norm (QK-norm)
    norm_position: str = choice("post", "pre")
    # how a sublayer's output joins the residual stream: plain x + f (the paper), deepnorm,
    # rezero, layerscale (t2/model/residual/; docs/components.md)
    residual: str = component("plain", RESIDUAL)
    tie_embeddings: str = choice("all", "decoder", "none")  # all: src, tgt and output share
    bias: bool = True  # biases in linear layers
    norm_eps: float = 1e-5
    max_positions: int = 1024  # learned positions' table size; tables grow for others
    rope_base: float = 10000.0
    # xavier: the paper's Glorot uniform; small: N(0, 0.02) (Marian, BART, BERT in transformers)
    init: str = choice("xavier", "default", "small")
    # normal: N(0, 1/d_model); unit: N(0, 1); small: N(0, 0.02) (transformers' Marian)
    embedding_init: str = choice("normal", "unit", "small")
    tie_qk_init: bool = False  # W_Q = W_K at initialisation (report 002)
    zero_init_output: bool = False  # zero output projections of attention and FFN (Fixup)

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("vocab_size", "d_model", "n_heads", "d_ff", "max_positions"):
            if getattr(self, name) < 1:
                raise ConfigError(f"model.{name} must be positive, got {getattr(self, name)}")
        for name in ("n_encoder_layers", "n_decoder_layers"):
            if getattr(self, name) < 0:
                raise ConfigError(f"model.{name} must be 0 or more, got {getattr(self, name)}")
        for name in ("dropout", "attention_dropout", "ffn_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"model.{name} must be in [0, 1), got {getattr(self, name)}")
        if self.d_model % self.n_heads:
            raise ConfigError(
                f"model.d_model={self.d_model} is not divisible by model.n_heads="
                f"{self.n_heads}; choose n_heads that divides d_model"
            )
        self._check_kv_heads()

    def _check_kv_heads(self) -> None:
        if self.n_kv_heads < 0 or (self.n_kv_heads and self.n_heads % self.n_kv_heads):
            divisors = [n for n in range(1, self.n_heads + 1) if self.n_heads % n == 0]
            raise ConfigError(
                f"model.n_kv_heads={self.n_kv_heads} does not divide model.n_heads="
                f"{self.n_heads}; choose 0 (one per query head) or one of "
                f"{', '.join(map(str, divisors))}"
            )
        if self.tie_qk_init and self.kv_heads != self.n_heads:
            raise ConfigError(
                f"model.tie_qk_init copies W_Q into W_K, which has {self.kv_heads} of "
                f"{self.n_heads} heads (model.n_kv_heads); use one without the other"
            )

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        """Key/value heads of every attention layer: n_kv_heads, or n_heads for 0."""
        return self.n_kv_heads or self.n_heads

    @property
    def d_kv(self) -> int:
        """The width of the keys (and of the values): kv_heads x d_head."""
        return self.kv_heads * self.d_head

    @property
    def d_hidden(self) -> int:
        """The FFN's hidden size: d_ff, or 2/3 of it for gated variants (its facts)."""
        return FFN.facts(self.ffn).hidden(self.d_ff)
