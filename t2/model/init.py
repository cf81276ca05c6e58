"""Initialisations studied in report 002: the paper's Xavier (Glorot & Bengio 2010),
embeddings N(0, 1/d_model), optional W_Q = W_K and zero-initialised output projections
(Fixup, Zhang et al. 2019); and transformers' N(0, 0.02) for matrices and embeddings
(`small`: what MarianMTModel, BART and BERT draw). A residual connection's own
initialisation comes last (t2.model.residual: DeepNorm scales what was drawn)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from torch import nn

from t2.model.attention import CrossAttention, SelfAttention
from t2.model.layers import Layer
from t2.model.positional import Positional

if TYPE_CHECKING:
    from t2.model.config import ModelConfig


def _xavier_blocks(linear: nn.Linear, rows: list[int]) -> None:
    """Glorot uniform per block of a fused projection (q, k, v), `rows` each."""
    for block in linear.weight.split(rows, dim=0):
        nn.init.xavier_uniform_(block)


SMALL_STD = 0.02  # transformers' init_std for Marian, BART and BERT


def embedding_std(cfg: ModelConfig) -> float:
    """The standard deviation embeddings (and an untied output matrix) are drawn with."""
    return {"normal": 1.0 / math.sqrt(cfg.d_model), "unit": 1.0, "small": SMALL_STD}[
        cfg.embedding_init
    ]


@torch.no_grad()
def initialise(model: nn.Module, cfg: ModelConfig) -> None:
    if cfg.init == "small":
        for module in model.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=SMALL_STD)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
    if cfg.init == "xavier":
        fused = {
            id(getattr(m, name)): rows
            for m in model.modules()
            if isinstance(m, (SelfAttention, CrossAttention))
            for name, rows in m.fused.items()
        }
        for module in model.modules():
            if isinstance(module, nn.Linear):
                _xavier_blocks(module, fused.get(id(module), [module.out_features]))
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
    std = embedding_std(cfg)
    for module in model.modules():
        if isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=std)
            if module.padding_idx is not None:
                module.weight[module.padding_idx].zero_()
    if getattr(model, "output", None) is not None:  # untied output: same scale as embeddings
        nn.init.normal_(model.output.weight, std=std)
    for module in model.modules():  # a scheme's own parameters (learned positions')
        if isinstance(module, Positional):
            module.initialise(std)
    for module in model.modules():
        # W_Q = W_K, biases too (they are nonzero under the default init)
        if cfg.tie_qk_init and isinstance(module, SelfAttention):
            for param in (module.qkv.weight, module.qkv.bias):
                if param is not None:
                    q, k, _ = param.chunk(3, dim=0)
                    k.copy_(q)
        if cfg.tie_qk_init and isinstance(module, CrossAttention):
            for kv, q in ((module.kv.weight, module.q.weight), (module.kv.bias, module.q.bias)):
                if kv is not None:
                    kv.chunk(2, dim=0)[0].copy_(q)
        if cfg.zero_init_output and isinstance(module, (SelfAttention, CrossAttention)):
            nn.init.zeros_(module.out_proj.weight)
        if cfg.zero_init_output and hasattr(module, "w2") and isinstance(module.w2, nn.Linear):
            nn.init.zeros_(module.w2.weight)
    for module in model.modules():  # what a residual connection prescribes (DeepNorm's beta)
        if isinstance(module, Layer):
            for residual, sublayer in module.sublayers():
                residual.connection.initialise(sublayer)
