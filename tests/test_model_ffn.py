"""Feed-forward networks: their formulas, the gated variants' matched parameter counts, and
each one's facts (parameters, FLOPs) against the module it builds."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from t2.model.ffn import build_ffn, gated_hidden_size
from t2.registry import FFN

pytestmark = pytest.mark.usefixtures("single_thread")

ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "swiglu": F.silu, "geglu": F.gelu}


def _n_params(name: str, d_model: int, d_ff: int, bias: bool) -> int:
    with torch.device("meta"):  # shapes only: no memory, no initialisation
        return sum(p.numel() for p in build_ffn(name, d_model, d_ff, 0.0, bias).parameters())


@pytest.mark.parametrize("d_model, d_ff", [(16, 48), (32, 64), (512, 2048), (1024, 4096)])
def test_gated_ffns_have_the_parameters_of_ungated_ones(d_model, d_ff):
    ungated = _n_params("relu", d_model, d_ff, bias=False)
    hidden = gated_hidden_size(d_ff)
    assert hidden % 8 == 0 and abs(hidden - 2 * d_ff / 3) <= 4
    for name in FFN.names():
        n = _n_params(name, d_model, d_ff, bias=False)
        if FFN.facts(name).gated:  # three matrices of 2/3 d_ff, rounded to a multiple of 8
            assert n == 3 * d_model * hidden, name
            assert abs(n - ungated) <= 12 * d_model, name  # the rounding: at most 4 x 3 columns
        else:
            assert n == ungated == 2 * d_model * d_ff, name
    # with biases (about d_ff / 3 more of them) the paper's sizes still agree within 0.5%
    if d_model >= 512:
        with_bias = [_n_params(name, d_model, d_ff, bias=True) for name in FFN.names()]
        assert max(with_bias) / min(with_bias) < 1.005


def test_gated_hidden_size_is_two_thirds():
    assert gated_hidden_size(2048) == 1368  # 2/3 * 2048 = 1365.3 -> 171 * 8
    assert gated_hidden_size(48) == 32
    assert gated_hidden_size(3) == 8  # never below one multiple


@pytest.mark.parametrize("name", FFN.names())
def test_ffn_matches_formula(name):
    torch.manual_seed(0)
    ffn = build_ffn(name, 8, 24, 0.0, True).double().eval()
    x = torch.randn(2, 3, 8, dtype=torch.float64)
    if FFN.facts(name).gated:  # (act(x W) * (x V)) W2, Shazeer 2020
        hidden = ACTIVATIONS[name](ffn.w_gate(x)) * ffn.w_up(x)
    else:  # act(x W1 + b1) W2 + b2
        hidden = ACTIVATIONS[name](ffn.w1(x))
    torch.testing.assert_close(ffn(x), ffn.w2(hidden))


def test_ffn_dropout_acts_on_hidden_activations_in_training_only():
    torch.manual_seed(0)
    ffn = build_ffn("relu", 8, 32, 0.5, True)
    x = torch.randn(4, 8)
    assert not torch.equal(ffn.train()(x), ffn.eval()(x))
    torch.testing.assert_close(ffn.eval()(x), ffn.w2(F.relu(ffn.w1(x))))


@pytest.mark.parametrize("name", FFN.names())
def test_each_ffns_facts_count_its_module(name):
    """Parameters (with and without biases) as built, and 2 FLOPs a token per weight of its
    matrices (every matmul of an FFN is a token times a weight matrix)."""
    facts = FFN.facts(name)
    for bias in (False, True):
        assert _n_params(name, 16, 48, bias) == facts.params(16, 48, bias)
    with torch.device("meta"):
        weights = sum(
            p.numel() for p in build_ffn(name, 16, 48, 0.0, True).parameters() if p.dim() == 2
        )
    assert facts.flops(16, 48) == 2 * weights and facts.hidden(48) == (32 if facts.gated else 48)
