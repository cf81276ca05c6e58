"""The DyT plugin's own tests: its formula (Zhu et al. 2025), its facts, and a tiny model
that trains a step with it. Run with `pytest examples/plugins`; a plugin of your own can
start from this file."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from t2.config import ModelConfig
from t2.errors import ExportError
from t2.model.norm import build_norm
from t2.model.summary import estimate_memory
from t2.model.transformer import Transformer
from t2.plugins import isolated, load_plugin
from t2.registry import NORM
from t2.serve.ct2 import check_exportable

PLUGIN = Path(__file__).resolve().parent / "dyt.py"


@pytest.fixture(autouse=True)
def dyt():
    """The plugin imported for one test, and forgotten after it."""
    with isolated():
        yield load_plugin(PLUGIN)


def test_dyt_is_gamma_tanh_alpha_x_plus_beta():
    norm = build_norm("dyt", 8, 1e-5).double()
    assert norm.alpha.item() == 0.5  # the paper's alpha_0
    torch.manual_seed(0)
    with torch.no_grad():  # non-trivial alpha, gain and shift: every term of the formula counts
        for p in norm.parameters():
            p.copy_(torch.randn_like(p))
    x = 3 * torch.randn(4, 5, 8, dtype=torch.float64)
    expected = norm.weight * torch.tanh(norm.alpha * x) + norm.bias
    torch.testing.assert_close(norm(x), expected)
    assert torch.equal(norm(torch.zeros(8, dtype=torch.float64)), norm.bias)  # tanh(0) = 0


def test_its_facts_count_what_it_builds(dyt):
    assert dyt.registers == ("norm dyt",) and NORM.origin("dyt") == f"plugin file {PLUGIN}"
    assert sum(p.numel() for p in build_norm("dyt", 16, 1e-5).parameters()) == 2 * 16 + 1
    cfg = ModelConfig(vocab_size=50, d_model=16, n_heads=2, d_ff=32, norm="dyt")
    layernorm = estimate_memory(replace(cfg, norm="layernorm"), 0, 64, 8, mixed=False)
    assert estimate_memory(cfg, 0, 64, 8, mixed=False).activations > layernorm.activations
    with pytest.raises(ExportError, match="CTranslate2 has no Dynamic Tanh"):
        check_exportable(cfg)


def test_a_tiny_model_with_dyt_trains_a_step():
    torch.manual_seed(0)
    cfg = ModelConfig(
        vocab_size=50, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1
    )
    model = Transformer(replace(cfg, norm="dyt"))
    src, tgt = torch.randint(4, 50, (2, 5)), torch.randint(4, 50, (2, 6))
    loss = model(src, tgt).log_softmax(-1).mean()
    loss.backward()
    assert torch.isfinite(loss) and all(p.grad is not None for p in model.parameters())
