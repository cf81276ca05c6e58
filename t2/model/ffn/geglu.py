"""GeGLU, Shazeer 2020 (arXiv:2002.05202): (GELU(x W) * (x V)) W2, GELU exact (erf)."""

from __future__ import annotations

import torch.nn.functional as F

from t2.facts import Ct2, FfnFacts
from t2.model.ffn import GatedFeedForward
from t2.registry import FFN


@FFN.register("geglu", FfnFacts(gated=True, ct2=Ct2({"activation": "GELU", "ffn_glu": True})))
class GeGLUFeedForward(GatedFeedForward):
    """(GELU(x W) * (x V)) W2, GELU exact (erf, as F.gelu)."""

    act = staticmethod(F.gelu)
