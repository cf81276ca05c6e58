"""No positional information: the bag-of-tokens ablation."""

from __future__ import annotations

import torch

from t2.facts import Ct2, PositionalFacts
from t2.model.config import ModelConfig
from t2.model.positional import Positional
from t2.registry import POSITIONAL


def _zero_table(cfg: ModelConfig, part: None) -> torch.Tensor:
    """A relative-position table of distances -1..1 (Shaw et al. 2018) that adds nothing."""
    return torch.zeros(3, cfg.d_head)


@POSITIONAL.register(
    "none",
    PositionalFacts(
        order=False,
        summary="no positions: the encoder sees its source as a bag of tokens",
        params=lambda d_model, max_positions: 0,
        # relative positions whose keys and values are zero: no positional term, no limit
        ct2=Ct2(
            {"relative_position": True},
            {"relative_position_keys": _zero_table, "relative_position_values": _zero_table},
        ),
    ),
)
class NoPositional(Positional):
    """No positional information (a bag-of-tokens ablation)."""
