"""Residual connections (model.residual) against their papers' formulas, in float64: the
wrapper's output for each placement, DeepNorm's constants and initialisation, ReZero's and
LayerScale's starting values, and plain, the default, as the paper's sum bit for bit."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from torch import nn

from t2.errors import ConfigError
from t2.model.layers import Residual
from t2.model.norm import build_norm
from t2.model.residual import Depth, build_residual
from t2.model.transformer import Transformer
from t2.registry import RESIDUAL

pytestmark = pytest.mark.usefixtures("single_thread")

D = 8


BASE_DEPTH = Depth(6, 6, False)  # an encoder sublayer of base's 6 + 6 layers


def wrapper(name: str, pre: bool, depth: Depth = BASE_DEPTH, dropout: float = 0.0):
    """A residual sublayer of `name` around a LayerNorm with a random gain and shift."""
    connection = build_residual(name, D, depth, "pre" if pre else "post")
    norm = build_norm("layernorm", D, 1e-5) if RESIDUAL.facts(name).normed else nn.Identity()
    with torch.no_grad():
        for p in norm.parameters():
            p.copy_(torch.randn_like(p))
    return Residual(norm, dropout, pre, connection).double()


def layer_norm(x: torch.Tensor, norm: nn.Module) -> torch.Tensor:
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return norm.weight * (x - mean) / torch.sqrt(var + norm.eps) + norm.bias


def inputs(seed: int = 0) -> tuple[torch.Tensor, nn.Linear]:
    """A batch of rows and a random sublayer f."""
    torch.manual_seed(seed)
    return torch.randn(3, 4, D, dtype=torch.float64), nn.Linear(D, D).double()


@pytest.mark.parametrize("pre", [False, True], ids=["post", "pre"])
def test_plain_is_the_papers_sum_bit_for_bit(pre):
    x, f = inputs()
    res = wrapper("plain", pre, dropout=0.3).train()
    torch.manual_seed(1)
    got = res(x, f)
    torch.manual_seed(1)  # the same dropout mask
    want = x + res.dropout(f(res.norm(x))) if pre else res.norm(x + res.dropout(f(x)))
    assert torch.equal(got, want)
    assert list(res.connection.parameters()) == []  # nothing new in a checkpoint


def test_plain_is_the_default_and_adds_nothing_to_the_state_dict(tiny_model_config):
    cfg = tiny_model_config()
    assert cfg.residual == "plain"
    keys = Transformer(cfg).state_dict()
    assert not [k for k in keys if "connection" in k]


@pytest.mark.parametrize(
    "n, m, alpha_enc, beta_enc, alpha_dec, beta_dec",
    [
        # Wang et al. 2022, Figure 2's encoder-decoder constants
        (6, 6, 0.81 * (6**4 * 6) ** 0.0625, 0.87 * (6**4 * 6) ** -0.0625, 18**0.25, 72**-0.25),
        (12, 2, 0.81 * (12**4 * 2) ** 0.0625, 0.87 * (12**4 * 2) ** -0.0625, 6**0.25, 24**-0.25),
        (4, 0, 8**0.25, 32**-0.25, None, None),  # no decoder: the encoder-only constants
    ],
)
def test_deepnorm_constants_are_the_papers(n, m, alpha_enc, beta_enc, alpha_dec, beta_dec):
    encoder = build_residual("deepnorm", D, Depth(n, m, False), "post")
    assert (encoder.alpha, encoder.beta) == pytest.approx((alpha_enc, beta_enc), rel=1e-12)
    if m:
        decoder = build_residual("deepnorm", D, Depth(n, m, True), "post")
        assert (decoder.alpha, decoder.beta) == pytest.approx((alpha_dec, beta_dec), rel=1e-12)


def test_deepnorm_is_post_layernorm_of_alpha_x_plus_f():
    x, f = inputs()
    res = wrapper("deepnorm", False)
    alpha = 0.81 * (6**4 * 6) ** (1 / 16)
    torch.testing.assert_close(res(x, f), layer_norm(alpha * x + f(x), res.norm))


def test_deepnorm_is_post_norm_only(tiny_model_config):
    with pytest.raises(ConfigError) as err:
        Transformer(tiny_model_config(residual="deepnorm", norm_position="pre"))
    assert str(err.value) == (
        "model.residual='deepnorm' is defined for model.norm_position=post, not 'pre'; "
        "set model.norm_position=post or another model.residual"
    )


def _deepnorm_factor(name: str, beta: float, rows: int, d_kv: int) -> torch.Tensor | float:
    """By Figure 2 of Wang et al. 2022: beta for the feed-forward's matrices and attention's
    values and output projection, 1 for queries, keys, biases, norms and embeddings; a
    fused projection of `rows` rows holds the values in its last `d_kv`."""
    if not name.endswith("weight") or "norm" in name or "embed" in name:
        return 1.0
    if "ffn." in name or "out_proj" in name:
        return beta
    if "qkv" not in name and ".kv." not in name:  # cross-attention's queries
        return 1.0
    factor = torch.ones(rows, 1)
    factor[-d_kv:] = beta  # the values: the last block of the fused projection
    return factor


@pytest.mark.parametrize("n_kv_heads", [0, 1], ids=["all-heads", "multi-query"])
def test_deepnorm_scales_the_initial_ffn_values_and_outputs_by_beta(tiny_model_config, n_kv_heads):
    """With one key/value head the fused projection is q (d rows), k and v (d / h each):
    the values are its last d / h rows, not its last third."""
    cfg = tiny_model_config(n_encoder_layers=2, n_decoder_layers=3, n_kv_heads=n_kv_heads)
    torch.manual_seed(0)
    plain = dict(Transformer(cfg).named_parameters())
    torch.manual_seed(0)
    deep = dict(Transformer(replace(cfg, residual="deepnorm")).named_parameters())
    betas = {"encoder": 0.87 * (2**4 * 3) ** (-1 / 16), "decoder": (12 * 3) ** (-1 / 4)}
    scaled = 0
    for name, p in deep.items():
        beta = betas.get(name.split(".")[0], 1.0)
        factor = _deepnorm_factor(name, beta, p.shape[0], cfg.d_kv)
        torch.testing.assert_close(p, plain[name] * factor, rtol=1e-6, atol=0, msg=name)
        scaled += not isinstance(factor, float) or factor != 1.0
    assert scaled == 2 * 4 + 3 * 6  # qkv, out, w1, w2; and cross-attention's kv and out


@pytest.mark.parametrize("pre", [False, True], ids=["post", "pre"])
def test_rezero_is_x_plus_alpha_f_without_a_norm(pre):
    """Bachlechner et al. 2020: x + alpha F(x), alpha from 0: each sublayer starts as the
    identity, and no norm, whatever the placement."""
    x, f = inputs()
    res = wrapper("rezero", pre)
    assert isinstance(res.norm, nn.Identity) and res.connection.alpha.item() == 0.0
    assert torch.equal(res(x, f), x)
    with torch.no_grad():
        res.connection.alpha.fill_(0.37)
    torch.testing.assert_close(res(x, f), x + 0.37 * f(x))


@pytest.mark.parametrize("placement, norms", [("post", 0), ("pre", 2)])
def test_rezero_keeps_only_a_pre_norm_stacks_final_norms(tiny_model_config, placement, norms):
    model = Transformer(tiny_model_config(residual="rezero", norm_position=placement))
    found = [n for n, m in model.named_modules() if isinstance(m, nn.LayerNorm)]
    assert found == ["encoder_norm", "decoder_norm"][:norms]


@pytest.mark.parametrize(
    "layers, epsilon", [(1, 0.1), (18, 0.1), (19, 1e-5), (24, 1e-5), (25, 1e-6), (36, 1e-6)]
)
def test_layerscale_starts_at_cait_epsilon_for_the_stacks_depth(layers, epsilon):
    """Touvron et al. 2021: lambda = epsilon, 0.1 up to depth 18, 1e-5 at 24, 1e-6 deeper;
    the depth of the sublayer's own stack."""
    for decoder in (False, True):
        depth = Depth(layers, 3, decoder) if not decoder else Depth(3, layers, decoder)
        scale = build_residual("layerscale", D, depth, "pre").scale
        assert torch.equal(scale, torch.full((D,), epsilon))


@pytest.mark.parametrize("pre", [False, True], ids=["post", "pre"])
def test_layerscale_is_x_plus_diag_lambda_f(pre):
    x, f = inputs()
    res = wrapper("layerscale", pre)
    lam = torch.randn(D, dtype=torch.float64)
    with torch.no_grad():
        res.connection.scale.copy_(lam)
    if pre:
        want = x + f(layer_norm(x, res.norm)) @ torch.diag(lam)
    else:
        want = layer_norm(x + f(x) @ torch.diag(lam), res.norm)
    torch.testing.assert_close(res(x, f), want)


@pytest.mark.parametrize("name", RESIDUAL.names())
def test_coefficients_are_the_connection_as_a_x_plus_b_y(name):
    """What the CTranslate2 export folds (t2.serve.ct2_residual) is what forward computes."""
    x, y = inputs()[0], torch.randn(3, 4, D, dtype=torch.float64)
    connection = wrapper(name, False).connection
    for p in connection.parameters():
        with torch.no_grad():
            p.copy_(torch.randn_like(p))
    a, b = (c.double() for c in connection.coefficients())
    torch.testing.assert_close(connection(x, y), a * x + b * y)
