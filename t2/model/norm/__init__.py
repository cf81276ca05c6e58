"""Normalisation layers (model.norm), one module each: layernorm (Ba et al. 2016),
rmsnorm (Zhang & Sennrich 2019) and scalenorm (Nguyen & Salazar 2019). A norm is a module
of (d_model, eps) that normalises the last dimension; it registers with its facts
(t2.facts.NormFacts)."""

from __future__ import annotations

from torch import nn

from t2.model.interface import build, keeps_shape
from t2.model.summary import as_declared
from t2.registry import NORM


def build_norm(name: str, d_model: int, eps: float) -> nn.Module:
    norm = build(NORM, name, nn.Module, d_model=d_model, eps=eps)
    as_declared(NORM, name, norm, NORM.facts(name).params(d_model))
    return keeps_shape(NORM, name, norm, d_model)
