"""SwiGLU, Shazeer 2020 (arXiv:2002.05202): (Swish(x W) * (x V)) W2."""

from __future__ import annotations

import torch.nn.functional as F

from t2.facts import Ct2, FfnFacts
from t2.model.ffn import GatedFeedForward
from t2.registry import FFN


@FFN.register("swiglu", FfnFacts(gated=True, ct2=Ct2({"activation": "SWISH", "ffn_glu": True})))
class SwiGLUFeedForward(GatedFeedForward):
    """(Swish(x W) * (x V)) W2, Swish(x) = x * sigmoid(x)."""

    act = staticmethod(F.silu)
