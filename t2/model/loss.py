"""Label-smoothed cross-entropy (Szegedy et al. 2016; the paper's eps_ls = 0.1).

The loss of a token with logits x (V of them), target t and smoothing eps is

    (1 - eps) * (lse(x) - x_t) + eps * (lse(x) - mean(x)),

lse the log-sum-exp, and its gradient softmax(x) - (1 - eps) * onehot(t) - eps / V; padding
tokens count zero. That is `F.cross_entropy(..., label_smoothing=eps)`, the reference path. On a
CPU, where the (tokens x vocabulary) tensors do not fit in the caches and every fresh one costs
page faults, training computes the same loss and gradient in blocks of tokens
(t2/model/loss_blocks.py) during the forward pass and keeps only the gradient, in the logits'
dtype (tests/test_model_loss.py checks both against the reference). The reference path upcasts
the logits to float32, takes the log-softmax, and its backward makes three more (tokens x
vocabulary) float32 tensors.

`projected_cross_entropy` goes one step further for train_step: it takes the decoder's states
and the output projection's weight, leaves padding positions out, and computes logits, loss and
both gradients group by group, so that no (tokens x vocabulary) tensor exists at all."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from t2.model.codepath import code_path
from t2.model.loss_blocks import ProjectedCrossEntropy, SmoothedCrossEntropy, folded_scale
from t2.model.loss_cuda import ChunkedProjectedCrossEntropy

Tensor = torch.Tensor


def projected_cross_entropy(
    hidden: Tensor,
    weight: Tensor,
    target: Tensor,
    pad_id: int,
    smoothing: float,
    grad_scale: Tensor | float | None = None,
) -> tuple[Tensor, Tensor]:
    """smoothed_cross_entropy(F.linear(hidden, weight), target, ...): the loss of the output
    projection of hidden states (B, T, D) by weight (V, D), summed over the target's real
    tokens, and their count.

    In training on a CPU the projection and the loss run together in groups of tokens
    (`loss_blocks.ProjectedCrossEntropy`): the logits of padding positions are never
    computed, and neither the (tokens x vocabulary) logits nor their gradient is ever held
    whole, which saves their memory and the page faults of fresh memory for them at every step. The
    gradients of `hidden` and `weight` are computed in the forward pass, in the dtype the
    projection runs in (autocast's, or the inputs'); `grad_scale` as in
    smoothed_cross_entropy. On CUDA, chunks of CUDA_PROJECTION_ROWS tokens, padding rows
    masked rather than left out (no host sync), and grad_scale applied by the backward
    pass. Elsewhere (no gradient, torch.compile, other devices) the plain path.
    """
    count = target.ne(pad_id).sum()
    grad = torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
    if code_path(hidden) == "cpu" and grad and not torch.compiler.is_compiling():
        scale = folded_scale(grad_scale)
        loss = ProjectedCrossEntropy.apply(hidden, weight, target, pad_id, smoothing, scale)
        return loss, count
    if code_path(hidden) == "cuda" and grad and not torch.compiler.is_compiling():
        return ChunkedProjectedCrossEntropy.apply(hidden, weight, target, pad_id, smoothing), count
    return smoothed_cross_entropy(F.linear(hidden, weight), target, pad_id, smoothing, grad_scale)


def smoothed_cross_entropy(
    logits: Tensor,
    target: Tensor,
    pad_id: int,
    smoothing: float,
    grad_scale: Tensor | float | None = None,
) -> tuple[Tensor, Tensor]:
    """Sum of label-smoothed token losses, ignoring padding, and the number of target tokens.

    logits (B, T, V) are upcast to float32 so that a bf16 forward pass keeps an exact loss.
    Returns tensors (no host sync): divide the sum by the count for the mean.
    grad_scale: the factor the caller multiplies the loss by before its one backward pass
    (train_step's 1 / tokens). The blockwise path folds it into the gradient as it computes
    it and hands that gradient over in the backward pass without a pass over the (tokens x
    vocabulary) tensor; backward through the same graph a second time then fails with a
    clear error (leave grad_scale unset to retain the graph). A backward with any other
    factor still gets the right gradient, with that pass.
    """
    count = target.ne(pad_id).sum()
    fused = code_path(logits) == "cpu" and logits.requires_grad and torch.is_grad_enabled()
    if fused and not torch.compiler.is_compiling():
        scale = folded_scale(grad_scale)
        return SmoothedCrossEntropy.apply(logits, target, pad_id, smoothing, scale), count
    loss = F.cross_entropy(
        logits.float().reshape(-1, logits.shape[-1]),
        target.flatten(),
        ignore_index=pad_id,
        label_smoothing=smoothing,
        reduction="sum",
    )
    return loss, count
