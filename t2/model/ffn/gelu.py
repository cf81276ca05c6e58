"""GELU (Hendrycks & Gimpel 2016, arXiv:1606.08415), exact (erf): GELU(x W1 + b1) W2 + b2."""

from __future__ import annotations

import torch.nn.functional as F

from t2.facts import Ct2, FfnFacts
from t2.model.ffn import FeedForward
from t2.registry import FFN


@FFN.register("gelu", FfnFacts(gated=False, ct2=Ct2({"activation": "GELU", "ffn_glu": False})))
class GELUFeedForward(FeedForward):
    """GELU(x W1 + b1) W2 + b2, GELU(x) = x * Phi(x) (erf, as F.gelu)."""

    act = staticmethod(F.gelu)
