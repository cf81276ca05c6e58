"""`train.py --dry-run`: the resolved config, parameter counts and a memory estimate."""

from __future__ import annotations

import dataclasses

import torch

from t2.config import Config
from t2.model.summary import count_parameters, estimate_memory
from t2.model.transformer import Transformer
from t2.train.setup import mixed_precision


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def vocabulary(cfg: Config) -> tuple[int, str]:
    """The vocabulary a run of `cfg` will have: its data.tokenizer's, else data.vocab_size
    (the size of the BPE it trains; model.vocab_size is set from the tokenizer)."""
    if cfg.data.tokenizer:
        from t2.data import load_tokenizer

        return len(load_tokenizer(cfg.data.tokenizer)), f"data.tokenizer={cfg.data.tokenizer}"
    return cfg.data.vocab_size, "data.vocab_size, the BPE it trains"


def describe(cfg: Config, recipe: str) -> str:
    vocab, origin = vocabulary(cfg)
    model_cfg = dataclasses.replace(cfg.model, vocab_size=vocab)
    with torch.device("meta"):  # shapes only: no memory, no initialisation cost
        model = Transformer(model_cfg)
    counts = count_parameters(model)
    tokens = cfg.data.max_tokens or cfg.data.batch_size * cfg.data.max_tokens_per_sentence
    mixed = mixed_precision(cfg.train.mixed_precision) != "no"  # `auto` as on this machine
    mem = estimate_memory(
        model_cfg, counts["total"], tokens, cfg.data.max_tokens_per_sentence, mixed
    )
    figures = [
        f"vocabulary: {vocab} ({origin})",
        f"parameters: {counts['total']}",
        *(f"  {part}: {counts[part]:,}" for part in ("embeddings", "encoder", "decoder")),
        f"training memory estimate ({tokens} tokens per micro-batch, "
        f"{'16-bit' if mixed else 'fp32'} activations, fp32 Adam):",
        f"  weights: {_gib(mem.weights)}",
        f"  gradients: {_gib(mem.gradients)}",
        f"  optimizer state: {_gib(mem.optimizer)}",
        f"  activations: {_gib(mem.activations)}",
        f"  total: {_gib(mem.total)}",
    ]
    # the figures are YAML comments: the whole output is a recipe (--recipe saved.yaml)
    lines = [f"# recipe: {recipe}", cfg.to_yaml().rstrip(), "", *(f"# {f}" for f in figures)]
    return "\n".join(lines)
