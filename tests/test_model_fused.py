"""The memory-lean autograd functions give the plain formulas' values and gradients and
save less for the backward pass."""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F

from t2.model.fused import Dropout, gated_projection, keep_mask, rms_norm, rotary, rotate_qk
from t2.model.positional.rope import rope_tables


def saved_bytes(fn, *inputs: torch.Tensor, constants: tuple[torch.Tensor, ...] = ()) -> int:
    """Bytes of the distinct storages, other than the inputs and constants, that autograd
    saves while running fn(*inputs)."""
    skip = {t.untyped_storage().data_ptr() for t in (*inputs, *constants)}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        ptr = t.untyped_storage().data_ptr()
        if ptr not in skip:
            seen[ptr] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*inputs)
    return sum(seen.values())


def grads(fn, *inputs: torch.Tensor, seed: int = 0) -> tuple[torch.Tensor, list[torch.Tensor]]:
    leaves = [x.detach().clone().requires_grad_() for x in inputs]
    out = fn(*leaves)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed), dtype=out.dtype)
    out.backward(g)
    return out.detach(), [x.grad for x in leaves]


def plain_rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return w * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def test_rms_norm_matches_formula_and_gradients():
    x, w = torch.randn(3, 5, 16, dtype=torch.float64), torch.randn(16, dtype=torch.float64)
    out, (gx, gw) = grads(lambda a, b: rms_norm(a, b, 1e-6), x, w)
    ref, (rx, rw) = grads(plain_rms_norm, x, w)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(gx, rx)
    torch.testing.assert_close(gw, rw)
    small = (x[:1, :2].clone().requires_grad_(), w.clone().requires_grad_())
    assert torch.autograd.gradcheck(lambda a, b: rms_norm(a, b, 1e-6), small)
    with torch.no_grad():  # inference takes PyTorch's kernel: the same values
        torch.testing.assert_close(rms_norm(x, w, 1e-6), ref)


def test_rms_norm_saves_less_than_the_composition():
    x, w = torch.randn(64, 32, 256, requires_grad=True), torch.ones(256, requires_grad=True)
    fused = saved_bytes(lambda a, b: rms_norm(a, b, 1e-6), x, w)
    plain = saved_bytes(lambda a, b: F.rms_norm(a, (256,), b, 1e-6), x, w)
    assert fused <= x.numel() * 4 * 0.1 < plain  # 1/rms only: x itself is an input


def test_rms_norm_bf16_input_keeps_dtype_and_float32_accuracy():
    x = torch.randn(4, 64).to(torch.bfloat16)
    w = torch.rand(64) + 0.5
    out = rms_norm(x.requires_grad_(), w.requires_grad_(), 1e-6)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(
        out.float(), plain_rms_norm(x.detach().float(), w.detach()), atol=1e-2, rtol=1e-2
    )


def test_rotate_qk_rotates_queries_and_keys_and_copies_values():
    cos, sin = rope_tables(7, 8, 10000.0)
    qkv = torch.randn(3, 2, 4, 7, 8, dtype=torch.float64)
    cos, sin = cos.double(), sin.double()
    out, (g,) = grads(lambda t: rotate_qk(t, cos, sin), qkv)
    torch.testing.assert_close(out[0], rotary(qkv[0], cos, sin))
    torch.testing.assert_close(out[1], rotary(qkv[1], cos, sin))
    torch.testing.assert_close(out[2], qkv[2])

    def plain(t: torch.Tensor) -> torch.Tensor:
        return torch.stack([rotary(t[0], cos, sin), rotary(t[1], cos, sin), t[2]])

    ref, (rg,) = grads(plain, qkv)
    torch.testing.assert_close(g, rg)
    with torch.no_grad():
        torch.testing.assert_close(rotate_qk(qkv, cos, sin), ref)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_rotate_qk_of_the_projection_layout_returns_its_gradient_in_that_layout(dtype):
    """The model passes a (B, T, 3, H, Dh) projection seen as (3, B, H, T, Dh): the output is
    contiguous for the kernels, the gradient comes back in the projection's own strides."""
    torch.manual_seed(0)
    cos, sin = (t.to(dtype) for t in rope_tables(5, 8, 10000.0))
    flat = torch.randn(2, 5, 3 * 4 * 8, dtype=dtype)
    view = lambda t: t.view(2, 5, 3, 4, 8).permute(2, 0, 3, 1, 4)  # noqa: E731

    def plain(t: torch.Tensor) -> torch.Tensor:
        t = view(t)
        return torch.stack([rotary(t[0], cos, sin), rotary(t[1], cos, sin), t[2]])

    out, (g,) = grads(lambda t: rotate_qk(view(t), cos, sin), flat)
    ref, (rg,) = grads(plain, flat)
    tol = {} if dtype == torch.float64 else {"atol": 2e-2, "rtol": 2e-2}
    assert out.is_contiguous() and g.is_contiguous()
    torch.testing.assert_close(out, ref, **tol)
    torch.testing.assert_close(g, rg, **tol)
    seen = []
    projection = view(flat.detach().requires_grad_())
    projection.register_hook(seen.append)
    rotated = rotate_qk(projection, cos, sin)
    rotated.backward(torch.ones_like(rotated))
    assert seen[0].stride() == projection.stride()  # the permute's backward is then a view


def test_rotate_qk_of_an_expanded_input_gets_a_writable_gradient():
    """An input whose elements share memory (expanded) cannot take its own strides for the
    gradient: it gets contiguous ones, and the gradient still sums over the expansion."""
    cos, sin = (t.double() for t in rope_tables(5, 8, 10000.0))
    one = torch.randn(1, 2, 4, 5, 8, dtype=torch.float64)

    def plain(t: torch.Tensor) -> torch.Tensor:
        t = t.expand(3, -1, -1, -1, -1)
        return torch.stack([rotary(t[0], cos, sin), rotary(t[1], cos, sin), t[2]])

    out, (g,) = grads(lambda t: rotate_qk(t.expand(3, -1, -1, -1, -1), cos, sin), one)
    ref, (rg,) = grads(plain, one)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(g, rg)


def test_rotate_qk_refuses_a_second_derivative():
    cos, sin = rope_tables(5, 8, 10000.0)
    qkv = torch.randn(3, 2, 4, 5, 8, requires_grad=True)
    with pytest.raises(RuntimeError, match="no second derivative"):  # never a silent 0
        torch.autograd.grad(rotate_qk(qkv, cos, sin).square().sum(), qkv, create_graph=True)


def test_rotate_qk_saves_no_activation():
    cos, sin = rope_tables(32, 64, 10000.0)
    qkv = torch.randn(3, 8, 4, 32, 64, requires_grad=True)
    assert saved_bytes(lambda t: rotate_qk(t, cos, sin), qkv, constants=(cos, sin)) == 0


@pytest.mark.parametrize("act", [F.silu, F.gelu], ids=["swiglu", "geglu"])
@pytest.mark.parametrize("bias", [False, True])
def test_gated_projection_matches_the_composition(act, bias):
    torch.manual_seed(0)
    linear = torch.nn.Linear(24, 16, bias=bias).double()
    a, b = torch.randn(2, 5, 24, dtype=torch.float64), torch.randn(2, 5, 24, dtype=torch.float64)
    params = [linear.weight] + ([linear.bias] if bias else [])

    def run(fn):
        for p in params:
            p.grad = None
        out, (ga, gb) = grads(fn, a, b)
        return out, ga, gb, [p.grad.clone() for p in params]

    fused = run(lambda x, y: gated_projection(x, y, linear, act))
    plain = run(lambda x, y: linear(act(x) * y))
    for got, want in zip(fused[:3], plain[:3], strict=True):
        torch.testing.assert_close(got, want)
    for got, want in zip(fused[3], plain[3], strict=True):
        torch.testing.assert_close(got, want)


def test_gated_projection_under_bf16_autocast_matches_within_bf16_tolerance():
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 32, bias=True)
    a, b = torch.randn(4, 64), torch.randn(4, 64)
    results = []
    for fn in (
        lambda x, y: gated_projection(x, y, linear, F.silu),
        lambda x, y: linear(F.silu(x) * y),
    ):
        linear.zero_grad()
        with torch.autocast("cpu", torch.bfloat16):
            x, y = a.clone().requires_grad_(), b.clone().requires_grad_()
            out = fn(x.bfloat16(), y.bfloat16())
        out.float().sum().backward()
        assert out.dtype == torch.bfloat16 and linear.weight.grad.dtype == torch.float32
        results.append((out.float(), x.grad, linear.weight.grad.clone(), linear.bias.grad.clone()))
    for got, want in zip(*results, strict=True):
        torch.testing.assert_close(got, want, atol=5e-2, rtol=2e-2)


def test_gated_projection_saves_half_of_the_composition():
    linear = torch.nn.Linear(128, 64)
    a = torch.randn(32, 16, 128, requires_grad=True)
    b = torch.randn(32, 16, 128, requires_grad=True)
    weights = (linear.weight,)
    fused = saved_bytes(
        lambda x, y: gated_projection(x, y, linear, F.silu), a, b, constants=weights
    )
    plain = saved_bytes(lambda x, y: linear(F.silu(x) * y), a, b, constants=weights)
    assert fused == 0 < plain  # only its inputs a and b; the composition adds silu(a), the product


def test_dropout_zeroes_with_probability_p_and_scales_the_rest():
    torch.manual_seed(0)
    drop = Dropout(0.25).train()
    x = torch.ones(200, 500, requires_grad=True)
    y = drop(x)
    kept = y.ne(0)
    assert abs(1 - kept.float().mean().item() - 0.25) < 0.01
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], 1 / 0.75))
    y.backward(torch.full_like(y, 2.0))
    torch.testing.assert_close(x.grad, kept * (2.0 / 0.75))  # the same mask in backward
    assert torch.equal(drop.eval()(x), x)


def test_dropout_rounds_p_to_16_bits_and_scales_by_the_rounded_p():
    torch.manual_seed(0)
    q = round(0.1 * 65536) / 65536  # 0.100006...
    y = Dropout(0.1).train()(torch.ones(400, 1000))
    kept = y.ne(0)
    assert abs(1 - kept.float().mean().item() - q) < 0.003
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], 1 / (1 - q)))


def test_dropout_masks_are_uniform_in_each_of_the_four_lanes_of_a_draw():
    """Four elements share one 64-bit draw: each must get 16 uniform bits (a draw of only
    63 bits would keep every element of the top lane at p = 0.5)."""
    torch.manual_seed(0)
    for p in (0.5, 0.1, 0.9):
        keep, q = keep_mask(torch.Size((4000, 64)), p, torch.device("cpu"))
        per_lane = 1 - keep.view(-1, 4).float().mean(0)
        assert q == round(p * 65536) / 65536
        torch.testing.assert_close(per_lane, torch.full((4,), q), atol=0.01, rtol=0)


def test_dropout_draws_are_reproducible_from_the_seed():
    x = torch.ones(33, 7)  # not a multiple of four elements
    masks = []
    for _ in range(2):
        torch.manual_seed(3)
        masks.append(Dropout(0.3).train()(x).ne(0))
    assert torch.equal(masks[0], masks[1])


def test_dropout_saves_a_boolean_mask():
    x = torch.randn(64, 32, 256, requires_grad=True)
    ours = saved_bytes(Dropout(0.1).train(), x)
    pytorch = saved_bytes(torch.nn.Dropout(0.1).train(), x)
    assert ours == x.numel() < pytorch  # one byte per element


def test_a_compiled_v2_model_gives_the_uncompiled_loss_and_gradients(tiny_model_config):
    """train.compile: under torch.compile the plain compositions run (the compiler fuses and
    recomputes by itself); dynamo traces the whole model (the eager backend: no C++ build)."""
    from t2.model.transformer import Transformer

    torch.manual_seed(0)
    cfg = tiny_model_config(
        positional="rope", norm="rmsnorm", ffn="swiglu", norm_position="pre", dropout=0.0
    )
    model = Transformer(cfg).train()
    src, tgt = torch.randint(4, cfg.vocab_size, (3, 7)), torch.randint(4, cfg.vocab_size, (3, 5))

    def loss_and_grads() -> tuple[torch.Tensor, list[torch.Tensor]]:
        model.zero_grad()
        loss = model(src, tgt).float().logsumexp(-1).sum()
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters()]

    want = loss_and_grads()
    torch._dynamo.reset()
    model.compile(dynamic=True, backend="eager", fullgraph=True)  # a graph break fails here
    got = loss_and_grads()
    torch.testing.assert_close(got[0], want[0])
    for g, w in zip(got[1], want[1], strict=True):
        torch.testing.assert_close(g, w)


def test_rope_on_the_fused_projection_saves_less_than_rotating_q_and_k_apart(monkeypatch):
    """Through PyTorch's SDPA (which saves its inputs), rotating the fused (q, k, v) at once
    keeps one buffer; rotating q and k apart kept them beside the unrotated projection."""
    from einops import rearrange

    import t2.model.kernels as kernels
    from t2.model.attention import SelfAttention
    from t2.model.positional import build_positional

    monkeypatch.setattr(kernels, "CPU_FORMULA_MAX_KEYS", 0)  # SDPA, not the formula
    torch.manual_seed(0)
    x = torch.randn(4, 12, 32, requires_grad=True)
    attn = SelfAttention(32, 4, 0.0, True, "sdpa")
    rope = build_positional("rope", 32, 8, 64, 10000.0)
    constants = (*attn.parameters(), *rope.buffers())

    def apart(h: torch.Tensor) -> torch.Tensor:
        q, k, v = rearrange(attn.qkv(h), "b t (n h d) -> n b h t d", n=3, h=4)
        return attn._attend(rope.rotate(q), rope.rotate(k), v, None, True)

    fused = saved_bytes(lambda h: attn(h, None, True, rope), x, constants=constants)
    plain = saved_bytes(apart, x, constants=constants)
    torch.testing.assert_close(attn(x, None, True, rope), apart(x))
    assert 0 < fused < plain


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_rms_norm_of_float32_input_under_autocast_is_the_float32_result(dtype):
    """Autocast would run the sums of squares in 16 bits (fp16's overflow at rms ~11 would
    zero the output): the norm switches it off and gives exactly the float32 values."""
    torch.manual_seed(0)
    x0, w0, g = 12 * torch.randn(4, 6, 512), torch.randn(512), torch.randn(4, 6, 512)
    results = []
    for context in (contextlib.nullcontext(), torch.autocast("cpu", dtype=dtype)):
        x, w = x0.clone().requires_grad_(), w0.clone().requires_grad_()
        with context:
            y = rms_norm(x, w, 1e-6)
        y.backward(g)
        results.append((y, x.grad, w.grad))
    for plain, autocast in zip(*results, strict=True):
        torch.testing.assert_close(autocast, plain, rtol=0, atol=0)


def test_gated_projection_leaves_its_inputs_alone_whatever_the_activation():
    torch.manual_seed(0)
    a, b = torch.randn(3, 8, requires_grad=True), torch.randn(3, 8, requires_grad=True)
    linear = torch.nn.Linear(8, 4)
    a1, kept = a * 1, (a * 1).detach()
    out = gated_projection(a1, b, linear, lambda t: t)  # an identity returns its input
    torch.testing.assert_close(a1.detach(), kept, rtol=0, atol=0)
    torch.testing.assert_close(out, linear(kept * b))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_on_cuda_s_path_is_pytorch_s_fused_norm_in_float32(dtype):
    """On CUDA rms_norm is F.rms_norm in float32 (one fused kernel each way): the same
    values and gradients as the CPU's autograd function."""
    from t2.model.codepath import simulated

    x = torch.randn(3, 5, 16, dtype=dtype, requires_grad=True)
    w = torch.randn(16, requires_grad=True)
    g = torch.randn(3, 5, 16, dtype=dtype)
    outs = []
    for path in ("cpu", "cuda"):
        with simulated(path):
            y = rms_norm(x, w, 1e-5)
            grads = torch.autograd.grad(y, (x, w), g)
        outs.append((y, *grads))
    tol = {"atol": 1e-5, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 2e-2, "rtol": 2e-2}
    for a, b in zip(*outs, strict=True):
        assert a.dtype == b.dtype
        torch.testing.assert_close(a, b, **tol)
