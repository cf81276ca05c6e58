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
