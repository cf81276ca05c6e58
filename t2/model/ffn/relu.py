"""ReLU, the paper's activation (Vaswani et al. 2017): max(0, x W1 + b1) W2 + b2."""

from __future__ import annotations

import torch.nn.functional as F

from t2.facts import Ct2, FfnFacts
from t2.model.ffn import FeedForward
from t2.registry import FFN


@FFN.register("relu", FfnFacts(gated=False, ct2=Ct2({"activation": "RELU", "ffn_glu": False})))
class ReLUFeedForward(FeedForward):
    """The paper's feed-forward network: max(0, x W1 + b1) W2 + b2."""

    act = staticmethod(F.relu)
