"""On a CUDA GPU only (skipped elsewhere; benchmarks/gpu.sh runs them): CUDA's code path
against the CPU's and the reference, on the device."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_attention_with_padding_runs_no_cudnn_kernel_and_agrees_with_the_formula():
    from torch.profiler import ProfilerActivity, profile

    from t2.model.kernels.math import math_attention
    from t2.model.kernels.sdpa import sdpa_attention

    q, k, v = (torch.randn(4, 8, 37, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    pad = torch.zeros(4, 37, dtype=torch.bool, device="cuda")
    pad[1, 30:] = True
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        out = sdpa_attention(q, k, v, pad, False, 0.0)
        torch.cuda.synchronize()
    cuda = torch.autograd.DeviceType.CUDA
    names = [e.name.lower() for e in prof.events() if e.device_type == cuda]
    assert names and not any("cudnn" in n for n in names), names
    torch.testing.assert_close(out, math_attention(q, k, v, pad, False, 0.0), atol=2e-2, rtol=2e-2)


def test_the_chunked_loss_on_cuda_gives_the_reference_loss_and_gradients():
    from t2.model.loss import projected_cross_entropy

    torch.manual_seed(0)
    hidden = torch.randn(4, 300, 64, device="cuda")
    weight = torch.randn(1000, 64, device="cuda") / 8
    target = torch.randint(1, 1000, (4, 300), device="cuda")
    target[1, 200:] = 0
    h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    with torch.autocast("cuda", torch.bfloat16):
        loss, n = projected_cross_entropy(h, w, target, 0, 0.1, None)
    loss.backward()
    h2, w2 = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    with torch.autocast("cuda", torch.bfloat16):
        ref = torch.nn.functional.cross_entropy(
            torch.nn.functional.linear(h2, w2).float().flatten(0, 1),
            target.flatten(),
            ignore_index=0,
            label_smoothing=0.1,
            reduction="sum",
        )
    ref.backward()
    torch.testing.assert_close(loss, ref, rtol=1e-3, atol=0)
    torch.testing.assert_close(h.grad, h2.grad, rtol=2e-2, atol=2e-2 * h2.grad.abs().max())
    torch.testing.assert_close(w.grad, w2.grad, rtol=2e-2, atol=2e-2 * w2.grad.abs().max())


def test_rms_norm_on_cuda_equals_the_cpu_function():
    from t2.model.fused import rms_norm

    x = torch.randn(8, 33, 512, requires_grad=True)
    w = torch.randn(512, requires_grad=True)
    y = rms_norm(x, w, 1e-5)
    y.sum().backward()
    xc, wc = x.detach().cuda().requires_grad_(), w.detach().cuda().requires_grad_()
    yc = rms_norm(xc, wc, 1e-5)
    yc.sum().backward()
    torch.testing.assert_close(yc.cpu(), y.detach(), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(xc.grad.cpu(), x.grad, atol=1e-4, rtol=1e-4)


def test_a_training_step_on_cuda_in_bf16_is_finite_and_moves_the_loss(tiny_model_config):
    from t2.model.transformer import Transformer

    torch.manual_seed(0)
    model = Transformer(tiny_model_config(), pad_id=0).cuda().train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, fused=True)
    src = torch.randint(3, 50, (16, 12), device="cuda")
    tgt = torch.randint(3, 50, (16, 10), device="cuda")
    losses = []
    for _ in range(20):
        with torch.autocast("cuda", torch.bfloat16):
            loss, n = model(src, tgt[:, :-1], tgt[:, 1:], 0.1)
        (loss / n).backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append((loss / n).item())
    assert all(torch.isfinite(torch.tensor(losses))) and losses[-1] < losses[0]


def _two_shapes_of_micro_batches() -> list[dict[str, torch.Tensor]]:
    """Two micro-batches of different bucket shapes, padding in both."""
    g = torch.Generator().manual_seed(1)
    batches = []
    for rows, length in ((16, 12), (8, 20)):
        ids = torch.randint(3, 300, (rows, length + 1), generator=g)
        ids[0, length - 3 :] = 0
        batches.append(
            {"src": ids[:, :-1].cuda(), "tgt_in": ids[:, :-1].cuda(), "tgt_out": ids[:, 1:].cuda()}
        )
    return batches


@pytest.mark.parametrize(
    ("mode", "padded_attention"),
    [("default", "sdpa"), ("graphs", "sdpa"), ("default", "flex"), ("graphs", "flex")],
)
def test_the_compiled_training_pass_gives_the_eager_loss_and_gradients(mode, padded_attention):
    """train.compile on CUDA (inductor; graphs: CUDA graphs too; flex: padded attention on
    FlexAttention) over two accumulated micro-batches of different bucket shapes, three
    steps: the eager pass's loss and gradients within bf16 tolerance at each. With graphs,
    torch's CUDA-graph trees run each shape's forward and backward eagerly at the first
    step (warm-up), record them at the second and replay them at the third: the third
    step replays every graph and records none, and no graph is skipped
    (triton.cudagraph_or_error turns a skip into an error)."""
    import copy

    import torch._inductor.config as inductor

    from benchmarks.graph_probe import GraphProbe
    from t2.config import ModelConfig
    from t2.model.transformer import Transformer
    from t2.train.compiling import TrainingForward

    torch.manual_seed(0)
    cfg = ModelConfig(
        vocab_size=300,
        d_model=64,
        n_heads=4,
        d_ff=128,
        n_encoder_layers=2,
        n_decoder_layers=2,
        positional="rope",
        norm="rmsnorm",
        ffn="swiglu",
        norm_position="pre",
        dropout=0.0,
    )
    eager_model = Transformer(cfg).cuda().train()
    compiled_model = copy.deepcopy(eager_model)
    batches = _two_shapes_of_micro_batches()
    autocast = lambda: torch.autocast("cuda", torch.bfloat16)  # noqa: E731

    def step(forward: TrainingForward) -> tuple[torch.Tensor, list[torch.Tensor]]:
        for p in forward.model.parameters():
            if p.grad is not None:
                p.grad.zero_()
        scale = torch.tensor(1.0 / 300, device="cuda")
        loss = sum(forward.run(b, 0.1, scale, lambda x: x.backward(), autocast) for b in batches)
        return loss, [p.grad.clone() for p in forward.model.parameters()]

    eager = TrainingForward(eager_model, False)
    compiled = TrainingForward(
        compiled_model, True, mode=mode, max_shapes=2, padded_attention=padded_attention
    )
    with inductor.patch({"triton.cudagraph_or_error": True}), GraphProbe() as probe:
        for _ in range(3):
            before = probe.counts()
            want, got = step(eager), step(compiled)
            assert compiled.is_compiled, compiled.fallback
            torch.testing.assert_close(got[0], want[0], rtol=2e-2, atol=0)
            for a, b in zip(got[1], want[1], strict=True):
                torch.testing.assert_close(a, b, rtol=5e-2, atol=5e-2 * b.abs().max().item())
        last = probe.counts() - before  # the third step's
    assert last.skips == 0 and probe.counts().skips == 0, probe.counts().reasons
    if mode == "graphs":  # each shape's forward and backward, replayed
        assert last.replays >= 4 and last.recordings == 0 and last.warmups == 0, last
    else:
        assert probe.counts().replays == probe.counts().recordings == 0
