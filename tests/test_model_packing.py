"""Packed teacher forcing (t2.model.packing): the position-wise layers see the real
positions only, and the loss and every gradient are those of the padded layout, for every
registered combination."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from t2.model import kernels
from t2.model.packing import Packing
from t2.model.transformer import Transformer
from t2.registry import ATTENTION, FFN, NORM, POSITIONAL

pytestmark = pytest.mark.usefixtures("single_thread")

V = 50  # conftest's TINY_MODEL vocabulary; id 0 is padding


def _batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """src (4, 7), tgt_in and target (4, 6) with padding of every length, a full row and
    a row that is only padding past its first token."""
    g = torch.Generator().manual_seed(seed)
    src, tgt = torch.randint(1, V, (4, 7), generator=g), torch.randint(1, V, (4, 7), generator=g)
    for row, (s, t) in enumerate([(7, 7), (3, 2), (5, 6), (1, 4)]):
        src[row, s:], tgt[row, t:] = 0, 0
    return src, tgt[:, :-1], tgt[:, 1:]


def test_pack_and_unpack_keep_the_real_positions_in_order():
    pad = torch.tensor([[False, False, True], [False, True, True]])
    packing = Packing.of(pad)
    x = torch.arange(2 * 3 * 2, dtype=torch.float32).view(2, 3, 2)
    packed = packing.pack(x)
    assert packed.tolist() == [[0, 1], [2, 3], [6, 7]]
    unpacked = packing.unpack(packed)
    assert unpacked.shape == x.shape
    assert torch.equal(unpacked[~pad], x[~pad]) and (unpacked[pad] == 0).all()


def test_unpack_zeroes_padding_whatever_its_memory_held_and_its_gradient_packs():
    pad = torch.rand(5, 8, generator=torch.Generator().manual_seed(0)) < 0.4
    packing = Packing.of(pad)
    for _ in range(3):  # fresh buffers may reuse freed memory that held NaN
        torch.full((5 * 8, 3), float("nan")).sum()
        x = torch.randn(int((~pad).sum()), 3, dtype=torch.float64, requires_grad=True)
        assert (packing.unpack(x)[pad] == 0).all()
    assert torch.autograd.gradcheck(packing.unpack, (x,))
    packing.unpack(x.detach()).mul_(2)  # a tensor of its own, not a view: in place is fine


def _losses_and_grads(
    model: nn.Module,
    packs: bool,
    monkeypatch,
    autocast: bool = False,
    batch: tuple[torch.Tensor, ...] | None = None,
):
    monkeypatch.setattr(Transformer, "packs", staticmethod(lambda src: packs))
    model.zero_grad()
    src, tgt_in, target = _batch() if batch is None else batch
    with torch.autocast("cpu", torch.bfloat16, enabled=autocast):
        loss, count = model(src, tgt_in, target, 0.1, grad_scale=0.5)
    (loss * 0.5).backward()
    return loss.detach(), count, {k: p.grad.clone() for k, p in model.named_parameters()}


@pytest.mark.parametrize("placement", ["pre", "post"])
@pytest.mark.parametrize("ffn", FFN.names())
@pytest.mark.parametrize("norm", NORM.names())
@pytest.mark.parametrize("positional", POSITIONAL.names())
def test_every_combination_gives_the_padded_loss_and_gradients(
    tiny_model_config, monkeypatch, positional, norm, ffn, placement
):
    torch.manual_seed(0)
    cfg = tiny_model_config(
        positional=positional, norm=norm, ffn=ffn, norm_position=placement, tie_embeddings="none"
    )
    model = Transformer(cfg).eval()  # no dropout: the two layouts draw different masks
    loss0, count0, grads0 = _losses_and_grads(model, False, monkeypatch)
    loss1, count1, grads1 = _losses_and_grads(model, True, monkeypatch)
    assert count1 == count0 == 6 + 1 + 5 + 3
    torch.testing.assert_close(loss1, loss0, rtol=1e-6, atol=0)
    for name, expected in grads0.items():
        tol = 1e-5 * expected.abs().max() + 1e-7
        assert (grads1[name] - expected).abs().max() <= tol, name


@pytest.mark.parametrize("formula_max_keys", [kernels.CPU_FORMULA_MAX_KEYS, 0])
@pytest.mark.parametrize("kernel", ATTENTION.names())
def test_every_attention_kernel_packs_alike_and_in_bf16(
    tiny_model_config, monkeypatch, kernel, formula_max_keys
):
    """Also with PyTorch's own scaled_dot_product_attention, which `sdpa` (and `flash_attn`
    without CUDA) hand short keys on a CPU to the explicit formula instead of."""
    monkeypatch.setattr(kernels, "CPU_FORMULA_MAX_KEYS", formula_max_keys)
    torch.manual_seed(0)
    model = Transformer(tiny_model_config(attention=kernel, positional="rope")).eval()
    for autocast in (False, True):
        loss0, _, grads0 = _losses_and_grads(model, False, monkeypatch, autocast)
        loss1, _, grads1 = _losses_and_grads(model, True, monkeypatch, autocast)
        torch.testing.assert_close(loss1, loss0, rtol=1e-2 if autocast else 1e-6, atol=0)
        for name, expected in grads0.items():
            tol = (3e-2 if autocast else 1e-5) * expected.abs().max() + 1e-7
            assert (grads1[name] - expected).abs().max() <= tol, name


def test_position_wise_layers_see_only_the_real_tokens(tiny_model_config):
    """The feed-forward networks of the encoder and the decoder get one row per real
    source or target token, and padding never reaches the loss: NaN embedded at every
    padding position changes nothing."""
    torch.manual_seed(0)
    cfg = tiny_model_config(ffn="swiglu", norm_position="pre", tie_embeddings="none")
    model = Transformer(cfg).train()
    rows: list[tuple[str, int]] = []
    for name, module in model.named_modules():
        if name.endswith("ffn"):
            module.register_forward_pre_hook(lambda m, a, n=name: rows.append((n, a[0].shape)))
    src, tgt_in, target = _batch()
    loss, _ = model(src, tgt_in, target, 0.1)
    n_src, n_tgt = int(src.ne(0).sum()), int((tgt_in.ne(0) | target.ne(0)).sum())
    d = model.cfg.d_model
    assert {s for n, s in rows if n.startswith("encoder")} == {(n_src, d)}
    assert {s for n, s in rows if n.startswith("decoder")} == {(n_tgt, d)}
    model.eval()
    clean, _ = model(src, tgt_in, target, 0.1)
    with torch.no_grad():
        model.src_embed.weight[0] = model.tgt_embed.weight[0] = float("nan")  # padding's
    assert torch.isfinite(loss) and torch.equal(model(src, tgt_in, target, 0.1)[0], clean)


def test_padding_inside_a_target_row_stays_a_key_as_in_the_padded_layout(
    tiny_model_config, monkeypatch
):
    """The decoder's causal self-attention masks no padding: a padding position before a
    real one is an ordinary key there, so packing drops trailing padding only."""
    torch.manual_seed(0)
    model = Transformer(tiny_model_config(positional="rope")).eval()
    src, tgt_in, target = _batch()
    tgt_in[0, 1] = target[0, 1] = 0  # a hole in a full row
    tgt_in[2, 2] = 0  # and one in the input only
    batch = (src, tgt_in, target)
    loss0, _, grads0 = _losses_and_grads(model, False, monkeypatch, batch=batch)
    loss1, _, grads1 = _losses_and_grads(model, True, monkeypatch, batch=batch)
    torch.testing.assert_close(loss1, loss0, rtol=1e-6, atol=0)
    for name, expected in grads0.items():
        assert (grads1[name] - expected).abs().max() <= 1e-5 * expected.abs().max() + 1e-7, name
