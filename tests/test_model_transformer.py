"""The assembled encoder-decoder: the registry sweep, causality, padding, the KV cache,
beam reordering and embedding tying."""

from __future__ import annotations

import pytest
import torch
from covering import swept, unmet

from t2.model.loss import smoothed_cross_entropy
from t2.model.summary import count_parameters
from t2.model.transformer import Transformer
from t2.registry import ATTENTION, FFN, NORM, POSITIONAL

pytestmark = pytest.mark.usefixtures("single_thread")

PLACEMENTS = ["pre", "post"]
V = 50  # the tiny vocabulary of conftest's TINY_MODEL; id 0 is padding


def _tokens(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(1, V, shape, generator=torch.Generator().manual_seed(seed))


def attention_options(positional: str, norm: str, ffn: str, placement: str) -> dict:
    """n_kv_heads (0 or 1 of TINY_MODEL's 2 heads) by the parity of the values' indices on
    their axes, qk_norm by that of the norm's and half the feed-forward's: each axis's every
    value then meets both settings of each (a covering, not the product's 4x the runs)."""
    at = [
        POSITIONAL.names().index(positional),
        NORM.names().index(norm),
        FFN.names().index(ffn),
        PLACEMENTS.index(placement),
    ]
    return {"n_kv_heads": sum(at) % 2, "qk_norm": (at[1] + at[2] // 2) % 2 == 1}


# every positional x norm x feed-forward x placement, each with a residual connection such
# that every connection meets every other component (tests/covering.py): the product with
# the connections would be four times as many models
SWEEP = swept(POSITIONAL.names(), NORM.names(), FFN.names(), PLACEMENTS)


@pytest.mark.parametrize(("positional", "norm", "ffn", "placement", "residual"), SWEEP)
def test_every_combination_trains(tiny_model_config, positional, norm, ffn, placement, residual):
    """Builds, runs forward and backward with every part wired in, and learns: ten Adam
    steps on one padded batch lower its loss. Multi-query attention and QK-norm vary along
    the sweep so that each meets every value of every axis (attention_options)."""
    torch.manual_seed(0)
    cfg = tiny_model_config(
        positional=positional,
        norm=norm,
        ffn=ffn,
        norm_position=placement,
        residual=residual,
        **attention_options(positional, norm, ffn, placement),
    )
    model = Transformer(cfg).train()
    src, tgt = _tokens(2, 7), _tokens(2, 6, seed=1)
    src[1, 4:] = 0  # padded source and target
    tgt[1, 3:] = 0
    logits = model(src, tgt[:, :-1])
    assert logits.shape == (2, 5, V)
    loss, n_tokens = smoothed_cross_entropy(logits, tgt[:, 1:], 0, 0.1)
    assert torch.isfinite(loss) and loss > 0 and n_tokens == 5 + 2
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, f"{name} is not used"  # every built part is wired in
        assert torch.isfinite(p.grad).all(), name
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    first = loss.item()
    for _ in range(10):  # train_step's path: the projection and the loss together
        optimizer.step()
        optimizer.zero_grad()
        loss, _ = model(src, tgt[:, :-1], tgt[:, 1:], 0.1)
        loss.backward()
    assert loss.item() < 0.8 * first, (first, loss.item())


def test_the_sweep_meets_every_residual_connection_with_every_component():
    assert unmet(SWEEP) == []


@pytest.mark.parametrize("tie", ["all", "decoder", "none"])
@pytest.mark.parametrize("autocast", [False, True])
def test_training_forward_gives_the_loss_and_gradients_of_the_logits(
    tiny_model_config, tie, autocast
):
    """model(src, tgt_in, target) (train_step's path) equals the loss of model(src, tgt_in)'s
    logits, and every parameter gets the same gradient, for each tying of the output
    projection; in bf16 autocast within bf16's rounding."""
    torch.manual_seed(0)
    model = Transformer(tiny_model_config(tie_embeddings=tie)).eval()  # no dropout
    src, tgt = _tokens(3, 7), _tokens(3, 6, seed=1)
    src[1, 4:], tgt[1, 3:], tgt[2, 5:] = 0, 0, 0
    grads, losses = [], []
    for fused in (False, True):
        model.zero_grad()
        with torch.autocast("cpu", torch.bfloat16, enabled=autocast):
            if fused:
                loss, n = model(src, tgt[:, :-1], tgt[:, 1:], 0.1, grad_scale=0.25)
            else:
                loss, n = smoothed_cross_entropy(model(src, tgt[:, :-1]), tgt[:, 1:], 0, 0.1)
        (loss * 0.25).backward()
        losses.append(loss.detach())
        grads.append({k: p.grad.clone() for k, p in model.named_parameters()})
    assert n.item() == 5 + 2 + 4
    torch.testing.assert_close(losses[1], losses[0], rtol=1e-5 if autocast else 1e-6, atol=0)
    for name, expected in grads[0].items():
        tol = 2e-2 * expected.abs().max() if autocast else 1e-5 * expected.abs().max() + 1e-7
        assert (grads[1][name] - expected).abs().max() <= tol, name


@pytest.mark.parametrize("kernel", [n for n in ATTENTION.names() if n != "sdpa"])
def test_every_attention_kernel_gives_the_same_model_output(tiny_model_config, kernel):
    src, tgt = _tokens(2, 7), _tokens(2, 5, seed=1)
    src[0, 5:] = 0
    outputs = []
    for name in ("sdpa", kernel):
        torch.manual_seed(0)
        outputs.append(Transformer(tiny_model_config(attention=name)).eval()(src, tgt))
    torch.testing.assert_close(outputs[1], outputs[0], rtol=1e-5, atol=1e-5)


def _model(tiny_model_config, **overrides) -> Transformer:
    torch.manual_seed(0)
    return Transformer(tiny_model_config(**overrides)).double().eval()


@pytest.mark.parametrize("positional", POSITIONAL.names())
def test_decoder_is_causal(tiny_model_config, positional):
    model = _model(tiny_model_config, positional=positional, n_decoder_layers=2)
    src, tgt = _tokens(1, 6), _tokens(1, 8, seed=1)
    logits = model(src, tgt)
    for t in range(1, 8):  # change token t: logits before t stay, logits at t change
        changed = tgt.clone()
        changed[0, t] = tgt[0, t] % (V - 1) + 1
        other = model(src, changed)
        torch.testing.assert_close(other[:, :t], logits[:, :t], rtol=0, atol=1e-12)
        assert not torch.allclose(other[:, t], logits[:, t])


@pytest.mark.parametrize("positional", POSITIONAL.names())
def test_padding_never_changes_real_outputs(tiny_model_config, positional):
    model = _model(tiny_model_config, positional=positional)
    short_src, long_src = _tokens(1, 4), _tokens(1, 7, seed=1)
    short_tgt, long_tgt = _tokens(1, 3, seed=2), _tokens(1, 6, seed=3)
    src = torch.cat([torch.nn.functional.pad(short_src, (0, 3)), long_src])  # (2, 7), 0 = pad
    tgt = torch.cat([torch.nn.functional.pad(short_tgt, (0, 3)), long_tgt])
    alone_memory = model.encode(short_src)
    batch_memory = model.encode(src)
    torch.testing.assert_close(batch_memory[:1, :4], alone_memory, rtol=0, atol=1e-10)
    torch.testing.assert_close(batch_memory[1:], model.encode(long_src), rtol=0, atol=1e-10)
    batch_logits = model(src, tgt)
    torch.testing.assert_close(
        batch_logits[:1, :3], model(short_src, short_tgt), rtol=0, atol=1e-10
    )
    torch.testing.assert_close(batch_logits[1:], model(long_src, long_tgt), rtol=0, atol=1e-10)


@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("positional", POSITIONAL.names())
def test_cached_decoding_equals_uncached(tiny_model_config, positional, placement):
    model = _model(
        tiny_model_config, positional=positional, norm_position=placement, n_decoder_layers=2
    )
    src, tgt = _tokens(2, 6), _tokens(2, 7, seed=1)
    src[1, 3:] = 0
    src_pad = src.eq(0)
    memory = model.encode(src, src_pad)
    full = model.decode(tgt, memory, src_pad)
    state = model.new_state()
    steps = [model.decode(tgt[:, :2], memory, src_pad, state)]  # a prefix, then one by one
    steps += [model.decode(tgt[:, t : t + 1], memory, src_pad, state) for t in range(2, 7)]
    assert state.offset == 7
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=0, atol=1e-10)


@pytest.mark.parametrize(
    "positional, options",
    [("sinusoidal", {}), ("rope", {}), ("relative", {"n_kv_heads": 1, "qk_norm": True})],
)
def test_reordered_cache_keeps_the_right_rows(tiny_model_config, positional, options):
    model = _model(tiny_model_config, positional=positional, n_decoder_layers=2, **options)
    src, tgt = _tokens(3, 6), _tokens(3, 6, seed=1)
    src[2, 4:] = 0
    src_pad = src.eq(0)
    memory = model.encode(src, src_pad)
    state = model.new_state()
    for t in range(3):
        model.decode(tgt[:, t : t + 1], memory, src_pad, state)
    index = torch.tensor([2, 0, 2, 1])  # beam search: duplicate, drop and permute rows
    state.reorder(index)
    memory, src_pad = memory[index], src_pad[index]
    prefixes = tgt[index, :3]
    new = _tokens(4, 3, seed=2)
    steps = [model.decode(new[:, t : t + 1], memory, src_pad, state) for t in range(3)]
    fresh = model.decode(torch.cat([prefixes, new], dim=1), memory, src_pad)
    torch.testing.assert_close(torch.cat(steps, dim=1), fresh[:, 3:], rtol=0, atol=1e-10)


@pytest.mark.parametrize("tie, n_matrices", [("all", 1), ("decoder", 2), ("none", 3)])
def test_embedding_tying(tiny_model_config, tie, n_matrices):
    model = Transformer(tiny_model_config(tie_embeddings=tie))
    out = model.output.weight if model.output is not None else model.tgt_embed.weight
    assert len({id(w) for w in (model.src_embed.weight, model.tgt_embed.weight, out)}) == n_matrices
    h = torch.randn(2, 16)
    torch.testing.assert_close(model.project(h), h @ out.T)  # the logits use that matrix
    assert (model.src_embed.weight is model.tgt_embed.weight) == (tie == "all")
    assert (model.output is None) == (tie != "none")
    untied = count_parameters(Transformer(tiny_model_config(tie_embeddings="none")))
    counts = count_parameters(model)
    assert untied["total"] - counts["total"] == (3 - n_matrices) * V * 16
    assert counts["embeddings"] == n_matrices * V * 16


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
@pytest.mark.parametrize(("positional", "masks"), [("sinusoidal", 2), ("alibi", 3)])
def test_flex_builds_each_block_mask_once_per_forward_with_sdpas_loss(
    tiny_model_config, monkeypatch, positional, masks
):
    """train.padded_attention=flex on the compiled CUDA pass (simulated here: CUDA's code
    path, FlexAttention run eagerly, forward only, as it has no backward on a CPU; when
    the pass takes it: test_model_kernels): 3 + 3 layers build the encoder's and the
    cross-attention's block masks once each (ALiBi's biased decoder self-attention a
    third), not one per layer, and give the SDPA pass's loss."""
    import torch.nn.attention.flex_attention as flex_attention

    from t2.model import transformer
    from t2.model.codepath import simulated

    built = []
    real = flex_attention.create_block_mask
    monkeypatch.setattr(
        flex_attention, "create_block_mask", lambda *a, **kw: built.append(1) or real(*a, **kw)
    )
    monkeypatch.setattr(transformer, "flex_wanted", lambda choice, t: choice == "flex")
    torch.manual_seed(0)
    cfg = tiny_model_config(positional=positional, n_encoder_layers=3, n_decoder_layers=3)
    model = Transformer(cfg).eval()
    src, tgt = _tokens(3, 9), _tokens(3, 7, seed=1)
    src[0, 6:], tgt[1, 5:] = 0, 0
    with simulated("cuda"), torch.no_grad():
        loss, _ = model(src, tgt[:, :-1], tgt[:, 1:], 0.1)
        assert built == []  # the default, SDPA
        flex_loss, _ = model(src, tgt[:, :-1], tgt[:, 1:], 0.1, padded_attention="flex")
    assert len(built) == masks
    torch.testing.assert_close(flex_loss, loss, rtol=1e-5, atol=1e-5)
