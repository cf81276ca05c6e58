"""The logits processors: each against its formula, and composed in the decode section's
order (temperature, top-k, top-p)."""

from __future__ import annotations

import torch

from t2.config import DecodeConfig
from t2.decoding.common import NEG_INF
from t2.decoding.processors import Temperature, TopK, TopP, process, processors

LOGITS = torch.log(torch.tensor([[0.5, 0.2, 0.15, 0.1, 0.05]]))


def test_each_processor_is_its_formula():
    assert torch.equal(Temperature(2.0)(LOGITS), LOGITS / 2.0)
    kept = TopK(2)(LOGITS)
    assert torch.equal(kept[0, :2], LOGITS[0, :2]) and kept[0, 2:].eq(NEG_INF).all()
    assert torch.equal(TopK(0)(LOGITS), LOGITS) and torch.equal(TopK(9)(LOGITS), LOGITS)
    nucleus = TopP(0.8)(LOGITS)  # 0.5 + 0.2 < 0.8 <= 0.5 + 0.2 + 0.15
    assert torch.equal(nucleus[0, :3], LOGITS[0, :3]) and nucleus[0, 3:].eq(NEG_INF).all()
    assert TopP(1e-6)(LOGITS)[0].isfinite().tolist() == [True, False, False, False, False]
    assert torch.equal(TopP(1.0)(LOGITS), LOGITS)


def test_the_decode_section_composes_them_in_order():
    assert processors(DecodeConfig(search="sample")) == []
    cfg = DecodeConfig(search="sample", temperature=0.5, top_k=3, top_p=0.9)
    chain = processors(cfg)
    assert chain == [Temperature(0.5), TopK(3), TopP(0.9)]
    assert torch.equal(process(chain, LOGITS), TopP(0.9)(TopK(3)(LOGITS / 0.5)))
