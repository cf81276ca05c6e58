"""Normalisation layers against their formulas, in float64."""

from __future__ import annotations

import pytest
import torch

from t2.model.norm import build_norm
from t2.registry import NORM

pytestmark = pytest.mark.usefixtures("single_thread")


def _randomised(name: str, d: int, eps: float):
    norm = build_norm(name, d, eps).double()
    with torch.no_grad():  # non-trivial gain and shift, so the formula's every term counts
        for p in norm.parameters():
            p.copy_(torch.randn_like(p))
    return norm


def test_layernorm_matches_formula():
    torch.manual_seed(0)
    eps = 1e-2  # large, so that a misplaced eps is visible
    norm = _randomised("layernorm", 8, eps)
    x = 3 * torch.randn(4, 5, 8, dtype=torch.float64) + 1
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)  # biased variance
    expected = norm.weight * (x - mean) / torch.sqrt(var + eps) + norm.bias
    torch.testing.assert_close(norm(x), expected)


def test_rmsnorm_matches_formula():
    torch.manual_seed(0)
    eps = 1e-2
    norm = _randomised("rmsnorm", 8, eps)
    assert [n for n, _ in norm.named_parameters()] == ["weight"]  # a gain, no shift
    x = 3 * torch.randn(4, 5, 8, dtype=torch.float64) + 1
    expected = norm.weight * x / torch.sqrt((x**2).mean(-1, keepdim=True) + eps)
    torch.testing.assert_close(norm(x), expected)


def test_scalenorm_matches_formula():
    """Nguyen & Salazar 2019: g x / ||x||, one learned scalar g from sqrt(d_model); the
    norm bounded below by eps (their code's clamp), which a near-zero row shows."""
    torch.manual_seed(0)
    d, eps = 8, 1e-2
    norm = build_norm("scalenorm", d, eps).double()
    assert [(n, p.shape) for n, p in norm.named_parameters()] == [("weight", torch.Size([]))]
    assert norm.weight.item() == pytest.approx(d**0.5)
    with torch.no_grad():
        norm.weight.fill_(1.7)
    x = 3 * torch.randn(4, 5, d, dtype=torch.float64) + 1
    x[0, 0] = 1e-4  # ||x|| = 2.8e-4 < eps
    length = torch.sqrt((x**2).sum(-1, keepdim=True))
    expected = 1.7 * x / torch.where(length > eps, length, torch.full_like(length, eps))
    torch.testing.assert_close(norm(x), expected)
    half = build_norm("scalenorm", d, eps)(x.to(torch.bfloat16))  # the norm in float32
    assert half.dtype == torch.bfloat16
    torch.testing.assert_close(half.double(), norm(x) / 1.7 * d**0.5, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("name", NORM.names())
def test_norm_starts_as_unit_gain_and_normalises_scale(name):
    norm = build_norm(name, 16, 1e-5).double()
    x = torch.randn(3, 16, dtype=torch.float64)
    torch.testing.assert_close(norm(10 * x), norm(x), rtol=1e-4, atol=1e-4)  # scale-free
    rms = norm(x).pow(2).mean(-1).sqrt()
    torch.testing.assert_close(rms, torch.ones(3, dtype=torch.float64), rtol=1e-3, atol=1e-3)
