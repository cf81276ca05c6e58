"""`train.py --dry-run`: the resolved config with its batch plan, parameter counts and the
memory estimate, for this machine or for a device and number of processes given."""

from __future__ import annotations

import dataclasses

import torch

from t2.config import Config
from t2.model.summary import count_parameters
from t2.model.transformer import Transformer
from t2.train.plan import Device, local_device, mixed, plan_batches, resolved, vocabulary


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def describe(cfg: Config, recipe: str, processes: int = 1, device: Device | None = None) -> str:
    """A recipe file (YAML) whose `auto` keys are the plan's numbers, with the figures as
    comments: the output can be passed back as --recipe."""
    vocab, origin = vocabulary(cfg)
    model_cfg = dataclasses.replace(cfg.model, vocab_size=vocab)
    with torch.device("meta"):  # shapes only: no memory, no initialisation cost
        counts = count_parameters(Transformer(model_cfg))
    plan = plan_batches(cfg, processes, device or local_device(), counts["total"])
    cfg = resolved(cfg, plan)
    mem = plan.estimate
    precision = "16-bit" if mixed(cfg, plan.device) else "fp32"
    tokens = plan.max_tokens or cfg.data.batch_size * cfg.data.max_tokens_per_sentence
    figures = [
        plan.line(),
        f"vocabulary: {vocab} ({origin})",
        f"parameters: {counts['total']}",
        *(f"  {part}: {counts[part]:,}" for part in ("embeddings", "encoder", "decoder")),
        f"training memory estimate ({tokens} tokens per micro-batch of pairs of "
        f"{cfg.data.max_tokens_per_sentence} tokens, {precision} activations, fp32 Adam, "
        f"{plan.device.kind} code path):",
        f"  weights: {_gib(mem.weights)}",
        f"  gradients: {_gib(mem.gradients)}",
        f"  optimizer state: {_gib(mem.optimizer)}",
        f"  activations: {_gib(mem.activations)}",
        f"  total: {_gib(mem.total)}",
    ]
    lines = [f"# recipe: {recipe}", cfg.to_yaml().rstrip(), "", *(f"# {f}" for f in figures)]
    return "\n".join(lines)
