"""Residual connections (model.residual), one module each: plain (Vaswani et al. 2017),
deepnorm (Wang et al. 2022), rezero (Bachlechner et al. 2020) and layerscale (Touvron et
al. 2021). A connection says how a sublayer's output y (after dropout) joins the residual
stream x; where the norm goes, before the sublayer or after the sum, is the wiring of
t2.model.layers.Residual, the same for every connection. Each registers with its facts
(t2.facts.ResidualFacts): its parameters, whether the sublayer keeps model.norm, the
placements its formula is defined for, its memory and FLOPs terms, and CTranslate2's
expression.

Every built-in connection is a x + b y with a and b scalars or per-channel vectors
(`coefficients`): what the CTranslate2 export folds into the weights
(t2.serve.ct2_residual)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from t2.errors import ConfigError
from t2.model.summary import as_declared
from t2.registry import RESIDUAL

Tensor = torch.Tensor


@dataclass(frozen=True)
class Depth:
    """Where a residual sublayer sits: the encoder's layers (N), the decoder's (M), and
    whether it is in the decoder. DeepNorm's constants and LayerScale's first value are
    functions of depth."""

    n_encoder_layers: int
    n_decoder_layers: int
    decoder: bool

    @property
    def layers(self) -> int:
        """The layers of its own stack."""
        return self.n_decoder_layers if self.decoder else self.n_encoder_layers


class Connection(nn.Module):
    """The interface: `forward(x, y)` joins a sublayer's output y to the stream x, both
    (..., d_model); `coefficients` are its a and b, where it is a x + b y; `initialise`
    sets what the variant prescribes once model.init has drawn the weights."""

    def __init__(self, d_model: int, depth: Depth) -> None:
        super().__init__()

    def coefficients(self) -> tuple[Tensor, Tensor]:
        """(a, b) of a x + b y, each of shape () or (d_model,), detached."""
        raise NotImplementedError(f"{type(self).__name__} is not of the form a x + b y")

    def initialise(self, sublayer: nn.Module) -> None:
        """Set the connection's own parameters, and rescale its sublayer's weights where
        the variant prescribes it (t2.model.init, after model.init's draw)."""


def build_residual(name: str, d_model: int, depth: Depth, norm_position: str) -> Connection:
    """The connection `name` of one sublayer; a placement its formula is not defined for is
    a one-line ConfigError (the model is built at start-up: t2.train.plan counts it)."""
    facts = RESIDUAL.facts(name)
    if norm_position not in facts.placements:
        raise ConfigError(
            f"model.residual={name!r} is defined for model.norm_position="
            f"{' or '.join(facts.placements)}, not {norm_position!r}; set "
            f"model.norm_position={facts.placements[0]} or another model.residual"
        )
    connection = RESIDUAL.get(name)(d_model, depth)
    return as_declared(RESIDUAL, name, connection, facts.params(d_model))
