"""Parameter counts by part and a training-memory estimate (report 001, section 3.4).

Activations follow Korthikanti et al. 2022 (arXiv:2205.05198, section 4.1): a layer with
s tokens per sequence, b sequences, width h and a heads keeps about 34sbh + 5as^2b bytes
in 16-bit; here the terms are derived for each sublayer and scaled to the element size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import nn

from t2.errors import ConfigError
from t2.model.config import ModelConfig
from t2.registry import ATTENTION, FFN, NORM, POSITIONAL, RESIDUAL, Registry


def count_parameters(model: nn.Module) -> dict[str, int]:
    """Unique parameters (tied matrices once) in total and by part."""
    seen: set[int] = set()
    parts = {"embeddings": 0, "encoder": 0, "decoder": 0, "other": 0}
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in seen:
            continue
        seen.add(id(p))
        top = name.split(".")[0]
        part = {
            "src_embed": "embeddings",
            "tgt_embed": "embeddings",
            "output": "embeddings",
            "positional": "embeddings",
            "encoder": "encoder",
            "encoder_norm": "encoder",
            "decoder": "decoder",
            "decoder_norm": "decoder",
        }.get(top, "other")
        parts[part] += p.numel()
    parts["total"] = sum(parts.values())
    return parts


def as_declared(registry: Registry, name: str, module: Any, declared: int) -> Any:
    """A component just built, if it has the parameters its facts declare (the FLOPs,
    memory and exports count with the facts); else a ConfigError naming both counts."""
    counted = sum(p.numel() for p in module.parameters())
    if counted != declared:
        raise ConfigError(
            f"{registry.kind} {name!r} builds {counted} parameters where its facts say "
            f"{declared}; correct the params of its facts ({registry.origin(name)})"
        )
    return module


@dataclass(frozen=True)
class MemoryEstimate:
    weights: int
    gradients: int
    optimizer: int
    activations: int

    @property
    def total(self) -> int:
        return self.weights + self.gradients + self.optimizer + self.activations


def _attention_elems(cfg: ModelConfig, s_q: int, s_k: int, b: int, fused: bool) -> float:
    """One attention layer's elements for b sequences of s_q queries over s_k keys."""
    h, a = cfg.d_model, cfg.n_heads
    # inputs of q/k/v and output projections, q k^T operands, softmax output and its
    # dropout mask, attention-weighted values: 5.5 sbh + 2.5 a s_q s_k b in 16-bit units,
    # k and v at their width (model.n_kv_heads); a fused kernel (CUDA's SDPA backends) keeps
    # one log-sum-exp per query instead of the (s_q x s_k) weights
    weights = 2 * a * s_q * b if fused else 2.5 * a * s_q * s_k * b
    return (3.5 * h + 2 * cfg.d_kv) * s_q * b + weights


def _self_attention_elems(cfg: ModelConfig, s: int, b: int, fused: bool) -> float:
    """A self-attention layer's, the positional scheme's own term and QK-norm's included
    (its norms keep their inputs: a query's heads and a key's); a scheme with a term of
    the probabilities (its facts' `weights`) keeps them on every device."""
    facts = POSITIONAL.facts(cfg.positional)
    positions = facts.saved(s, s, cfg.n_heads) * b
    norms = NORM.facts(cfg.norm).saved(cfg.d_head) * (cfg.n_heads + cfg.kv_heads) * s * b
    attention = _attention_elems(cfg, s, s, b, fused and not facts.weights)
    return attention + positions + (norms if cfg.qk_norm else 0.0)


def _wrapper_elems(cfg: ModelConfig) -> float:
    """A token's elements in one residual sublayer's wrapper: its norm (none where the
    connection's facts drop it) and the connection's own term."""
    residual = RESIDUAL.facts(cfg.residual)
    norm = NORM.facts(cfg.norm).saved(cfg.d_model) if residual.normed else 0
    return norm + residual.saved(cfg.d_model)


def estimate_memory(
    cfg: ModelConfig,
    n_params: int,
    tokens_per_batch: int,
    seq_len: int,
    mixed: bool,
    device: str = "cpu",
) -> MemoryEstimate:
    """Bytes for fp32 weights, gradients, Adam's two moments and one batch's activations,
    on `device`'s code path ("cpu" or "cuda"): checked against measured peaks by
    benchmarks/bench_memory.py (docs/performance.md)."""
    b = max(1, tokens_per_batch // seq_len)
    s = seq_len
    fused = device == "cuda" and ATTENTION.facts(cfg.attention).fused
    wrapper = s * b * _wrapper_elems(cfg)  # each residual sublayer's norm and connection
    ffn_elems = s * b * FFN.facts(cfg.ffn).saved(cfg.d_model, cfg.d_ff)
    enc = _self_attention_elems(cfg, s, b, fused) + ffn_elems + 2 * wrapper
    dec = (
        _self_attention_elems(cfg, s, b, fused)
        + _attention_elems(cfg, s, s, b, fused)
        + ffn_elems
        + 3 * wrapper
    )
    # the logits: on CUDA the compiled training pass (train.compile, the default there)
    # keeps the whole batch's logits in the activations' dtype for the backward pass and
    # makes their gradient, counted as one float32 (tokens x vocabulary) tensor; the eager
    # chunked loss (t2.model.loss_cuda.CUDA_PROJECTION_ROWS tokens at a time) holds less. A
    # CPU's blockwise loss holds none whole either; its term stays at two float32 (tokens x
    # vocabulary) tensors, which over-counts there and makes up for layer terms that
    # under-count (measured on a CPU: base at an 8k vocabulary 0.85-0.92x the peak, at 32k
    # 1.10x; docs/performance.md)
    act_bytes = 2 if mixed else 4
    if device == "cuda":
        logits = s * b * cfg.vocab_size * (act_bytes + 4)
    else:
        logits = 2 * s * b * cfg.vocab_size * 4
    activations = int(
        act_bytes * (cfg.n_encoder_layers * enc + cfg.n_decoder_layers * dec) + logits
    )
    return MemoryEstimate(4 * n_params, 4 * n_params, 8 * n_params, activations)
