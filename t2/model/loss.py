"""Label-smoothed cross-entropy (Szegedy et al. 2016; the paper's eps_ls = 0.1).

The loss of a token with logits x (V of them), target t and smoothing eps is
(1 - eps) * (lse(x) - x_t) + eps * (lse(x) - mean(x)), lse the log-sum-exp, and its gradient
softmax(x) - (1 - eps) * onehot(t) - eps / V; padding tokens count zero. That is
`F.cross_entropy(..., label_smoothing=eps)`, the reference path. On a CPU, where the
(tokens x vocabulary) tensors do not fit in the caches and every fresh one costs page
faults, training computes the same loss and gradient in blocks of CHUNK_ROWS tokens during
the forward pass and keeps only the gradient, in the logits' dtype (tests/test_model_loss.py
checks both against the reference). The reference path upcasts the logits to float32, takes
the log-softmax, and its backward makes three more (tokens x vocabulary) float32 tensors.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from t2.model.fused import first_order_only

Tensor = torch.Tensor

CHUNK_ROWS = 128  # tokens per block: 128 x 8k float32 = 4 MiB, within a CPU's L2 + L3 share


class _SmoothedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: Tensor, target: Tensor, pad_id: int, eps: float,  # type: ignore[override]
                scale: float | None) -> Tensor:  # fmt: skip
        vocab = logits.shape[-1]
        flat, ids = logits.reshape(-1, vocab), target.reshape(-1, 1)
        grad = torch.empty_like(flat)
        block = flat.new_empty((min(CHUNK_ROWS, flat.shape[0]), vocab), dtype=torch.float32)
        total = torch.zeros((), dtype=torch.float32, device=logits.device)
        for start in range(0, flat.shape[0], CHUNK_ROWS):
            rows = slice(start, start + CHUNK_ROWS)
            t = ids[rows]  # this block only, upcast into one reused buffer (no fresh pages)
            x = block[: t.shape[0]].copy_(flat[rows])
            pad = t.eq(pad_id)
            t = t.masked_fill(pad, 0)  # a pad id outside the vocabulary (-100) is ignored too
            lse = torch.logsumexp(x, -1, keepdim=True)
            loss = (lse - x.gather(1, t)).mul_(1 - eps)
            if eps > 0:
                loss.add_((lse - x.mean(-1, keepdim=True)).mul_(eps))
            total += loss.masked_fill_(pad, 0.0).sum()
            p = x.sub_(lse).exp_()  # softmax, in place of the copy
            if eps > 0:
                p.sub_(eps / vocab)
            p.scatter_add_(1, t, torch.full_like(lse, eps - 1.0))
            # the caller's scale applied in float32, the result rounded once to the logits' dtype
            torch.mul(p.masked_fill_(pad, 0.0), 1.0 if scale is None else scale, out=grad[rows])
        ctx.save_for_backward(grad)
        ctx.shape, ctx.scale, ctx.handed_over = logits.shape, scale, False
        return total

    @staticmethod
    def backward(ctx, grad_loss: Tensor):  # type: ignore[override]
        first_order_only("the blockwise smoothed_cross_entropy")
        if ctx.handed_over:
            raise RuntimeError(
                "smoothed_cross_entropy(grad_scale=...) handed its saved gradient to the first "
                "backward pass; to run backward again on a retained graph, leave grad_scale "
                "unset"
            )
        (grad,) = ctx.saved_tensors
        if ctx.scale is not None and grad_loss.item() == ctx.scale:
            # the expected scale: the saved gradient is the answer, handed over without a
            # pass; it may end up as a leaf's .grad, so this function never reads it again
            ctx.handed_over = True
            return grad.view(ctx.shape), None, None, None, None
        # any other scale: one more pass, in float32, rounded once; not in place, since a
        # retained graph may run this backward again
        factor = grad_loss if ctx.scale is None else grad_loss / ctx.scale
        return (grad * factor).view(ctx.shape), None, None, None, None


def smoothed_cross_entropy(
    logits: Tensor, target: Tensor, pad_id: int, smoothing: float,
    grad_scale: Tensor | float | None = None,
) -> tuple[Tensor, Tensor]:  # fmt: skip
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
    fused = logits.device.type == "cpu" and logits.requires_grad and torch.is_grad_enabled()
    if fused and not torch.compiler.is_compiling():
        scale = None if grad_scale is None else float(grad_scale)  # a CPU tensor: no sync
        return _SmoothedCrossEntropy.apply(logits, target, pad_id, smoothing, scale), count
    loss = F.cross_entropy(
        logits.float().flatten(0, 1),
        target.flatten(),
        ignore_index=pad_id,
        label_smoothing=smoothing,
        reduction="sum",
    )
    return loss, count
