"""Label-smoothed cross-entropy: a hand-computed value, and padding contributes nothing."""

from __future__ import annotations

import math

import pytest
import torch

from t2.model.loss import smoothed_cross_entropy

pytestmark = pytest.mark.usefixtures("single_thread")

PAD = 0


def test_smoothed_loss_equals_hand_computed_value():
    # V = 4 (class 0 is padding); probabilities chosen so that the logs are readable
    probs = torch.tensor([[[0.1, 0.4, 0.25, 0.25], [0.7, 0.1, 0.1, 0.1]]])
    target = torch.tensor([[1, 3]])
    loss, n = smoothed_cross_entropy(probs.log(), target, PAD, smoothing=0.1)
    # q = (1 - eps) one_hot(y) + eps / V over all V classes; loss = -sum_c q_c log p_c
    tok1 = -(0.9 + 0.025) * math.log(0.4) - 0.025 * (math.log(0.1) + 2 * math.log(0.25))
    tok2 = -(0.9 + 0.025) * math.log(0.1) - 0.025 * (math.log(0.7) + 2 * math.log(0.1))
    assert loss.item() == pytest.approx(tok1 + tok2, rel=1e-6)
    assert n.item() == 2
    plain, _ = smoothed_cross_entropy(probs.log(), target, PAD, smoothing=0.0)
    assert plain.item() == pytest.approx(-math.log(0.4) - math.log(0.1), rel=1e-6)


def test_padding_targets_contribute_nothing():
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 11, requires_grad=True)
    target = torch.randint(1, 11, (2, 5))
    target[0, 3:] = PAD
    loss, n = smoothed_cross_entropy(logits, target, PAD, smoothing=0.1)
    assert n.item() == 8
    loss.backward()
    assert logits.grad[0, 3:].abs().sum() == 0  # nothing flows from padded positions
    assert logits.grad[0, :3].abs().sum() > 0
    changed = logits.detach().clone()
    changed[0, 3:] = 100 * torch.randn(2, 11)
    torch.testing.assert_close(smoothed_cross_entropy(changed, target, PAD, 0.1)[0], loss)
    real_only = smoothed_cross_entropy(logits[:1, :3], target[:1, :3], PAD, 0.1)[0]
    real_only += smoothed_cross_entropy(logits[1:], target[1:], PAD, 0.1)[0]
    torch.testing.assert_close(real_only, loss)


def test_loss_is_float32_for_bf16_logits():
    logits = torch.randn(1, 3, 7).bfloat16()
    loss, _ = smoothed_cross_entropy(logits, torch.tensor([[1, 2, 3]]), PAD, 0.1)
    assert loss.dtype == torch.float32
    expected, _ = smoothed_cross_entropy(logits.float(), torch.tensor([[1, 2, 3]]), PAD, 0.1)
    torch.testing.assert_close(loss, expected)


def reference(logits: torch.Tensor, target: torch.Tensor, smoothing: float) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(
        logits.float().flatten(0, 1),
        target.flatten(),
        ignore_index=PAD,
        label_smoothing=smoothing,
        reduction="sum",
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_training_path_gives_the_reference_loss_and_gradient(dtype, smoothing, monkeypatch):
    """Blocks of 7 tokens over 3 x 10 tokens: several blocks, the last one partial, padding
    in the middle of a block; the gradient scaled as train_step scales the loss."""
    monkeypatch.setattr("t2.model.loss_blocks.CHUNK_ROWS", 7)
    torch.manual_seed(0)
    logits = (3 * torch.randn(3, 10, 50)).to(dtype)
    target = torch.randint(1, 50, (3, 10))
    target[1, 6:] = PAD
    ours = logits.clone().requires_grad_()
    loss, n = smoothed_cross_entropy(ours, target, PAD, smoothing)
    (loss * 0.37).backward()
    torch.testing.assert_close(ours.detach(), logits, rtol=0, atol=0)  # the input is kept
    theirs = logits.clone().requires_grad_()
    expected = reference(theirs, target, smoothing)
    (expected * 0.37).backward()
    assert n.item() == 26 and loss.dtype == torch.float32
    torch.testing.assert_close(loss, expected)
    tol = {"atol": 1e-6, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 2e-3, "rtol": 2e-2}
    assert ours.grad.dtype == dtype
    torch.testing.assert_close(ours.grad.float(), theirs.grad.float(), **tol)
    assert ours.grad[1, 6:].abs().sum() == 0


def test_training_path_gives_the_hand_computed_value():
    probs = torch.tensor([[[0.1, 0.4, 0.25, 0.25], [0.7, 0.1, 0.1, 0.1]]])
    logits = probs.log().requires_grad_()
    loss, _ = smoothed_cross_entropy(logits, torch.tensor([[1, 3]]), PAD, smoothing=0.1)
    tok1 = -(0.9 + 0.025) * math.log(0.4) - 0.025 * (math.log(0.1) + 2 * math.log(0.25))
    tok2 = -(0.9 + 0.025) * math.log(0.1) - 0.025 * (math.log(0.7) + 2 * math.log(0.1))
    assert loss.item() == pytest.approx(tok1 + tok2, rel=1e-6)


def test_training_path_backward_can_run_twice_on_a_retained_graph():
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 9, requires_grad=True)
    loss, _ = smoothed_cross_entropy(logits, torch.randint(1, 9, (2, 4)), PAD, 0.1)
    loss.backward(retain_graph=True)
    once = logits.grad.clone()
    loss.backward()
    torch.testing.assert_close(logits.grad, 2 * once)


def test_training_path_keeps_one_gradient_in_the_logits_dtype():
    """Saved for backward: one (tokens x vocabulary) tensor in bf16, where the reference
    keeps float32 log-probabilities (twice the bytes)."""
    logits = torch.randn(4, 8, 100).bfloat16().requires_grad_()
    target = torch.randint(1, 100, (4, 8))
    sizes = {}
    for name, fn in (
        ("ours", lambda: smoothed_cross_entropy(logits, target, PAD, 0.1)[0]),
        ("reference", lambda: reference(logits, target, 0.1)),
    ):
        saved = []
        with torch.autograd.graph.saved_tensors_hooks(
            lambda t, saved=saved: saved.append(t.numel() * t.element_size()) or t, lambda t: t
        ):
            fn()
        sizes[name] = max(saved)
    assert sizes["ours"] == logits.numel() * 2 < sizes["reference"]


def test_training_path_scales_a_bf16_gradient_in_float32():
    """train_step scales the loss by 1 / tokens: the scale is applied in float32 and the
    result rounded once, not rounded to bf16 first (a skew of up to 0.2% on every weight)."""
    torch.manual_seed(0)
    logits = torch.randn(4, 16, 64).bfloat16()
    target = torch.randint(1, 64, (4, 16))
    grads = []
    for scale in (None, torch.tensor(1 / 3001)):
        x = logits.clone().requires_grad_()
        loss, _ = smoothed_cross_entropy(x, target, PAD, 0.1)
        (loss if scale is None else loss * scale).backward()
        grads.append(x.grad)
    assert torch.equal(grads[1], (grads[0].float() * (1 / 3001)).bfloat16())


def test_training_path_ignores_a_pad_id_outside_the_vocabulary():
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 9)
    target = torch.randint(0, 9, (2, 5))
    target[1, 2:] = -100
    ours = logits.clone().requires_grad_()
    loss, n = smoothed_cross_entropy(ours, target, -100, 0.1)
    loss.backward()
    theirs = logits.clone().requires_grad_()
    expected = torch.nn.functional.cross_entropy(
        theirs.flatten(0, 1),
        target.flatten(),
        ignore_index=-100,
        label_smoothing=0.1,
        reduction="sum",
    )
    expected.backward()
    assert n.item() == 7
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(ours.grad, theirs.grad)


def test_training_path_refuses_a_second_derivative():
    logits = torch.randn(2, 3, 7, requires_grad=True)
    loss, _ = smoothed_cross_entropy(logits, torch.randint(1, 7, (2, 3)), PAD, 0.1)
    with pytest.raises(RuntimeError, match="no second derivative"):  # never a silent 0
        torch.autograd.grad(loss, logits, create_graph=True)


def test_training_path_folds_the_expected_scale_into_the_gradient():
    """grad_scale (train_step's 1 / tokens) is applied as each block's gradient is computed,
    in float32 and rounded once: the same gradient as scaling the float32 one, with no pass
    over the (tokens x vocabulary) gradient in backward (it is the saved tensor itself)."""
    torch.manual_seed(0)
    logits = (3 * torch.randn(4, 16, 64)).bfloat16()
    target = torch.randint(1, 64, (4, 16))
    target[2, 9:] = PAD
    scale = torch.tensor(1 / 3001)
    exact = logits.float().requires_grad_()
    smoothed_cross_entropy(exact, target, PAD, 0.1)[0].backward()
    leaf = logits.clone().requires_grad_()
    nonleaf = leaf * 1  # as the model's logits are
    seen, saved = [], []
    nonleaf.register_hook(seen.append)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        loss, _ = smoothed_cross_entropy(nonleaf, target, PAD, 0.1, grad_scale=scale)
    (loss * scale).backward()
    assert torch.equal(seen[0], (exact.grad * scale).bfloat16())
    assert seen[0].data_ptr() == saved[-1].data_ptr()


@pytest.mark.parametrize("how", ["leaf", "view of a leaf", "clone of a leaf", "product"])
def test_training_path_gradients_for_other_scales_retained_graphs_and_the_hand_over(how):
    """A loss scaled by other than grad_scale gets its gradient (a retained graph may run
    it again); the expected scale hands the saved gradient over (it may become a leaf's
    .grad), after which a further backward through the graph fails with a clear error
    instead of reading a gradient someone else now owns."""
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 9)
    target = torch.randint(1, 9, (2, 5))
    reference_grad = logits.clone().requires_grad_()
    smoothed_cross_entropy(reference_grad, target, PAD, 0.1)[0].backward()
    x = logits.clone().requires_grad_()
    y = {
        "leaf": lambda: x,
        "view of a leaf": lambda: x.view(2, 5, 9),
        "clone of a leaf": x.clone,
        "product": lambda: x * 1,
    }[how]()
    loss, _ = smoothed_cross_entropy(y, target, PAD, 0.1, grad_scale=0.5)
    (loss * 0.25).backward(retain_graph=True)
    torch.testing.assert_close(x.grad, 0.25 * reference_grad.grad)
    (loss * 0.25).backward(retain_graph=True)
    (loss * 0.5).backward(retain_graph=True)  # the expected scale: handed over
    torch.testing.assert_close(x.grad, reference_grad.grad)
    with pytest.raises(RuntimeError, match="handed its saved gradient"):
        (loss * 0.25).backward()
    torch.testing.assert_close(x.grad, reference_grad.grad)


def test_training_path_without_grad_scale_runs_backward_on_a_retained_graph_as_often():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 9, requires_grad=True)
    loss, _ = smoothed_cross_entropy(x.view(2, 5, 9), torch.randint(1, 9, (2, 5)), PAD, 0.1)
    loss.backward(retain_graph=True)
    once = x.grad.clone()
    for _ in range(3):
        loss.backward(retain_graph=True)
    torch.testing.assert_close(x.grad, 4 * once)


# projected_cross_entropy: the output projection and the loss together (train_step's path)


def _projection_case(pad_id: int = PAD):
    torch.manual_seed(0)
    hidden = torch.randn(3, 11, 16)
    weight = torch.randn(40, 16) / 4
    target = torch.randint(1, 40, (3, 11))
    target[0, 7:] = pad_id  # padding in the middle of a group and of a block
    target[2, 2:5] = pad_id
    return hidden, weight, target


def _reference_projection(hidden, weight, target, pad_id, autocast, scale):
    h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    with torch.autocast("cpu", torch.bfloat16, enabled=autocast):
        loss = torch.nn.functional.cross_entropy(
            torch.nn.functional.linear(h, w).float().flatten(0, 1),
            target.flatten(),
            ignore_index=pad_id,
            label_smoothing=0.1,
            reduction="sum",
        )
    (loss * scale).backward()
    return loss.detach(), h.grad, w.grad


@pytest.mark.parametrize("autocast", [False, True])
@pytest.mark.parametrize("pad_id", [PAD, -100])
def test_projected_loss_gives_the_reference_loss_and_gradients(autocast, pad_id, monkeypatch):
    """Groups of 8 tokens in blocks of 3 over 33 tokens (partial ones at both levels), a pad
    id inside or outside the vocabulary; fp32 exactly, bf16 autocast within its rounding."""
    from t2.model.loss import projected_cross_entropy

    monkeypatch.setattr("t2.model.loss_blocks.PROJECTION_ROWS", 8)
    monkeypatch.setattr("t2.model.loss_blocks.CHUNK_ROWS", 3)
    hidden, weight, target = _projection_case(pad_id)
    expected, grad_h, grad_w = _reference_projection(hidden, weight, target, pad_id, autocast, 0.1)
    h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    with torch.autocast("cpu", torch.bfloat16, enabled=autocast):
        loss, n = projected_cross_entropy(h, w, target, pad_id, 0.1, grad_scale=0.1)
    (loss * 0.1).backward()
    assert n.item() == 33 - 4 - 3 and loss.dtype == torch.float32
    torch.testing.assert_close(loss, expected, rtol=1e-5 if autocast else 1e-6, atol=0)
    assert h.grad.dtype == w.grad.dtype == torch.float32
    for ours, theirs in ((h.grad, grad_h), (w.grad, grad_w)):
        tol = 1e-2 * theirs.abs().max() if autocast else 1e-6 * theirs.abs().max()
        assert (ours - theirs).abs().max() <= tol
    assert h.grad[0, 7:].abs().sum() == 0 and h.grad[2, 2:5].abs().sum() == 0


def test_projected_loss_never_projects_padding_positions():
    """Padding positions are left out before the projection: whatever their states hold
    (here NaN and inf), the loss and every gradient are those of the real tokens."""
    from t2.model.loss import projected_cross_entropy

    hidden, weight, target = _projection_case()
    poisoned = hidden.clone()
    poisoned[0, 7:] = float("nan")
    poisoned[2, 2:5] = float("inf")
    results = []
    for states in (hidden, poisoned):
        h, w = states.clone().requires_grad_(), weight.clone().requires_grad_()
        loss, _ = projected_cross_entropy(h, w, target, PAD, 0.1)
        loss.backward()
        results.append((loss, h.grad, w.grad))
    for clean, dirty in zip(*results, strict=True):
        assert torch.equal(clean, dirty)


def test_projected_loss_holds_no_tokens_by_vocabulary_tensor(monkeypatch):
    """What it keeps for the backward pass is the gradients of the states and the weight
    (tokens x D and V x D), never the (tokens x vocabulary) logits or their gradient."""
    from t2.model.loss import projected_cross_entropy

    monkeypatch.setattr("t2.model.loss_blocks.PROJECTION_ROWS", 8)
    hidden = torch.randn(4, 16, 8, requires_grad=True)
    weight = torch.randn(500, 8, requires_grad=True)
    target = torch.randint(1, 500, (4, 16))
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(
        lambda t: saved.append(t.numel()) or t, lambda t: t
    ):
        projected_cross_entropy(hidden, weight, target, PAD, 0.1)
    assert saved and max(saved) == weight.numel() < 64 * 500


def test_projected_loss_scales_hands_over_and_refuses_what_it_cannot_do():
    """Another scale than grad_scale gets its gradient (again on a retained graph); the
    expected scale hands the saved weight gradient over, after which a further backward
    fails with a clear error; a second derivative is refused, never a silent 0."""
    from t2.model.loss import projected_cross_entropy

    hidden, weight, target = _projection_case()
    _, grad_h, grad_w = _reference_projection(hidden, weight, target, PAD, False, 1.0)
    h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    loss, _ = projected_cross_entropy(h, w, target, PAD, 0.1, grad_scale=0.5)
    (loss * 0.25).backward(retain_graph=True)
    torch.testing.assert_close(w.grad, 0.25 * grad_w)
    (loss * 0.25).backward(retain_graph=True)
    (loss * 0.5).backward(retain_graph=True)  # the expected scale: handed over
    torch.testing.assert_close(w.grad, grad_w)
    torch.testing.assert_close(h.grad, grad_h)
    with pytest.raises(RuntimeError, match="handed its saved weight gradient"):
        (loss * 0.25).backward()
    loss, _ = projected_cross_entropy(h, w, target, PAD, 0.1)
    with pytest.raises(RuntimeError, match="no second derivative"):
        torch.autograd.grad(loss, h, create_graph=True)


def test_projected_loss_without_gradients_is_the_plain_one():
    from t2.model.loss import projected_cross_entropy

    hidden, weight, target = _projection_case()
    with torch.no_grad():
        loss, n = projected_cross_entropy(hidden, weight, target, PAD, 0.1)
    expected, _, _ = _reference_projection(hidden, weight, target, PAD, False, 1.0)
    torch.testing.assert_close(loss, expected)
    assert n.item() == 26


@pytest.mark.parametrize("projected", [False, True])
def test_a_zero_grad_scale_is_refused_and_padding_is_masked_by_itself(projected):
    """Padding is left out of the loss by its mask, not by the folded scale (a scale of 0
    once zeroed the whole loss); a zero grad_scale, which would fold a zero gradient in
    for good, is refused in one line."""
    from t2.model.loss import projected_cross_entropy

    hidden, weight, target = _projection_case()
    h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()

    def loss_of(**kwargs):
        if projected:
            return projected_cross_entropy(h, w, target, PAD, 0.1, **kwargs)[0]
        return smoothed_cross_entropy(torch.nn.functional.linear(h, w), target, PAD, 0.1, **kwargs)[
            0
        ]

    expected, _, _ = _reference_projection(hidden, weight, target, PAD, False, 1.0)
    torch.testing.assert_close(loss_of(grad_scale=1e-30), expected)
    with pytest.raises(ValueError, match="grad_scale=0"):
        loss_of(grad_scale=0.0)


@pytest.mark.parametrize("autocast", [False, True])
@pytest.mark.parametrize("pad_id", [PAD, -100])
def test_projected_loss_on_cuda_s_path_gives_the_reference_in_chunks(autocast, pad_id, monkeypatch):
    """CUDA's chunked path (chunks of 8 over 33 tokens, the last partial; padding rows
    masked, not left out): the reference loss and gradients, the scale applied by the
    backward pass (a device multiply, no host read), nothing (tokens x vocabulary) kept."""
    from t2.model.codepath import simulated
    from t2.model.loss import projected_cross_entropy

    monkeypatch.setattr("t2.model.loss_cuda.CUDA_PROJECTION_ROWS", 8)
    hidden, weight, target = _projection_case(pad_id)
    expected, grad_h, grad_w = _reference_projection(hidden, weight, target, pad_id, autocast, 0.1)
    h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    saved = []
    with (
        simulated("cuda"),
        torch.autocast("cpu", torch.bfloat16, enabled=autocast),
        torch.autograd.graph.saved_tensors_hooks(
            lambda t: saved.append(t.numel()) or t, lambda t: t
        ),
    ):
        loss, n = projected_cross_entropy(h, w, target, pad_id, 0.1, torch.tensor(0.1))
    (loss * torch.tensor(0.1)).backward()
    assert n.item() == 33 - 4 - 3 and loss.dtype == torch.float32
    assert max(saved) <= max(hidden.numel(), weight.numel())
    torch.testing.assert_close(loss, expected, rtol=1e-5 if autocast else 1e-6, atol=0)
    assert h.grad.dtype == w.grad.dtype == torch.float32
    for ours, theirs in ((h.grad, grad_h), (w.grad, grad_w)):
        tol = 1e-2 * theirs.abs().max() if autocast else 1e-6 * theirs.abs().max()
        assert (ours - theirs).abs().max() <= tol
    assert h.grad[0, 7:].abs().sum() == 0 and h.grad[2, 2:5].abs().sum() == 0
