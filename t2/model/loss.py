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

`projected_cross_entropy` goes one step further for train_step: it takes the decoder's states
and the output projection's weight, leaves padding positions out, and computes logits, loss
and both gradients group by group, so that no (tokens x vocabulary) tensor exists at all.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from t2.model.codepath import code_path
from t2.model.fused import first_order_only

Tensor = torch.Tensor

CHUNK_ROWS = 128  # tokens per block: 128 x 8k float32 = 4 MiB, within a CPU's L2 + L3 share
# tokens whose logits projected_cross_entropy holds at once: 1,024 x 8k bf16 = 16 MiB, under
# glibc's largest mmap threshold (32 MiB), so its buffers come from the heap, not fresh pages
PROJECTION_ROWS = 1024


def _block_loss_and_grad(x: Tensor, target: Tensor, pad: Tensor, eps: float, scale: float,
                         out: Tensor) -> Tensor:  # fmt: skip
    """The summed loss of a float32 block of logits x (rows, V), overwritten in the process,
    and its gradient times `scale` written into `out` (rows, V), rounded once to out's dtype.

    With m = max(x) and s = sum(exp(x - m)), lse = m + log s: the loss is
    (1 - eps)(lse - x_t) + eps (lse - mean(x)) and the gradient exp(x - m) / s - eps / V,
    minus (1 - eps) at t; rows whose target is padding count zero. One exp pass.
    """
    vocab = x.shape[-1]
    m = x.amax(-1, keepdim=True)
    loss = (m - x.gather(1, target)).mul_(1 - eps)
    if eps > 0:
        loss.add_((m - x.mean(-1, keepdim=True)).mul_(eps))
    e = x.sub_(m).exp_()
    s = e.sum(-1, keepdim=True)
    loss.add_(s.log())  # lse - m, which both terms share with weight (1 - eps) + eps
    keep = (~pad).to(x.dtype) * scale  # scale for real tokens, 0 for padding
    e.mul_(s.reciprocal_().mul_(keep))
    if eps > 0:
        e.sub_(keep * (eps / vocab))
    e.scatter_add_(1, target, keep * (eps - 1.0))
    out.copy_(e)
    return loss.masked_fill_(pad, 0.0).sum()


def _folded_scale(grad_scale: Tensor | float | None) -> float | None:
    """grad_scale as a float (a CPU tensor's value: no device sync on this CPU-only path).
    Zero is refused: the folded gradient would be all zeros, and no later factor could
    bring it back."""
    if grad_scale is None:
        return None
    scale = float(grad_scale)
    if scale == 0.0:
        raise ValueError("grad_scale=0 would fold a zero gradient into the loss; leave it "
                         "unset, or multiply the loss by 0 after the call")  # fmt: skip
    return scale


def _backward_factor(ctx, name: str, saved: str, grad_loss: Tensor) -> Tensor | None:
    """The factor a blockwise loss's backward applies to its saved gradient, or None when
    grad_loss is the expected grad_scale: the saved gradient is then handed over as it is,
    and since it may become a leaf's .grad, a further backward through the same graph fails
    with a clear error instead of reading it again."""
    first_order_only(name)
    if ctx.handed_over:
        raise RuntimeError(
            f"{name}(grad_scale=...) handed its saved {saved} to the first backward pass; to "
            f"run backward again on a retained graph, leave grad_scale unset"
        )
    if ctx.scale is not None and grad_loss.item() == ctx.scale:
        ctx.handed_over = True
        return None
    return grad_loss if ctx.scale is None else grad_loss / ctx.scale


class _SmoothedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: Tensor, target: Tensor, pad_id: int, eps: float,  # type: ignore[override]
                scale: float | None) -> Tensor:  # fmt: skip
        vocab = logits.shape[-1]
        flat, ids = logits.reshape(-1, vocab), target.reshape(-1, 1)
        grad = torch.empty_like(flat)
        block = flat.new_empty((min(CHUNK_ROWS, flat.shape[0]), vocab), dtype=torch.float32)
        total = torch.zeros((), dtype=torch.float32, device=logits.device)
        factor = 1.0 if scale is None else scale
        for start in range(0, flat.shape[0], CHUNK_ROWS):
            rows = slice(start, start + CHUNK_ROWS)
            t = ids[rows]  # this block only, upcast into one reused buffer (no fresh pages)
            pad = t.eq(pad_id)  # a pad id outside the vocabulary (-100) is ignored too
            x = block[: t.shape[0]].copy_(flat[rows])
            total += _block_loss_and_grad(x, t.masked_fill(pad, 0), pad, eps, factor, grad[rows])
        ctx.save_for_backward(grad)
        ctx.shape, ctx.scale, ctx.handed_over = logits.shape, scale, False
        return total

    @staticmethod
    def backward(ctx, grad_loss: Tensor):  # type: ignore[override]
        factor = _backward_factor(ctx, "smoothed_cross_entropy", "gradient", grad_loss)
        (grad,) = ctx.saved_tensors
        if factor is None:  # the saved gradient is the answer, handed over without a pass
            return grad.view(ctx.shape), None, None, None, None
        # any other scale: one more pass, in float32, rounded once; not in place, since a
        # retained graph may run this backward again
        return (grad * factor).view(ctx.shape), None, None, None, None


class _ProjectedCrossEntropy(torch.autograd.Function):
    """The output projection and the loss together, PROJECTION_ROWS tokens at a time: each
    group's logits are computed into one reused buffer, overwritten block by block with
    their scaled gradient, and turned at once into the group's share of the gradients of
    the hidden states and of the weight. The (tokens x vocabulary) logits and gradient never
    exist whole, and tokens whose target is padding are left out before the projection."""

    @staticmethod
    def forward(ctx, hidden: Tensor, weight: Tensor, target: Tensor, pad_id: int,  # type: ignore[override]
                eps: float, scale: float | None) -> Tensor:  # fmt: skip
        kind = hidden.device.type
        dtype = (torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind)
                 else torch.promote_types(hidden.dtype, weight.dtype))  # fmt: skip
        with torch.autocast(kind, enabled=False):  # the products in autocast's dtype, as F.linear
            d, flat_t = hidden.shape[-1], target.reshape(-1)
            rows = flat_t.ne(pad_id).nonzero().squeeze(1)  # a host sync: this path is CPU-only
            h = hidden.reshape(-1, d).index_select(0, rows).to(dtype)
            ids, w = flat_t.index_select(0, rows).unsqueeze(1), weight.to(dtype)
            n, vocab = h.shape[0], w.shape[0]
            grad_h = torch.empty_like(h)
            grad_w = torch.zeros((vocab, d), dtype=torch.float32, device=hidden.device)
            logits = h.new_empty((min(PROJECTION_ROWS, n), vocab))
            upcast = dtype != torch.float32  # the loss in float32 from 16-bit logits
            block = (
                logits.new_empty((min(CHUNK_ROWS, n), vocab), dtype=torch.float32)
                if upcast
                else None
            )
            partial = w.new_empty((vocab, d)) if upcast else None
            no_pad = torch.zeros((min(CHUNK_ROWS, n), 1), dtype=torch.bool, device=h.device)
            total = torch.zeros((), dtype=torch.float32, device=hidden.device)
            factor = 1.0 if scale is None else scale
            for start in range(0, n, PROJECTION_ROWS):
                hs = h[start : start + PROJECTION_ROWS]
                y = torch.mm(hs, w.t(), out=logits[: hs.shape[0]])
                for sub in range(0, hs.shape[0], CHUNK_ROWS):
                    yb = y[sub : sub + CHUNK_ROWS]
                    t = ids[start + sub : start + sub + yb.shape[0]]
                    x = yb if block is None else block[: t.shape[0]].copy_(yb)
                    total += _block_loss_and_grad(x, t, no_pad[: t.shape[0]], eps, factor, yb)
                torch.mm(y, w, out=grad_h[start : start + hs.shape[0]])  # y is now the gradient
                if upcast:  # each group's product rounded once, summed in float32
                    grad_w.add_(torch.mm(y.t(), hs, out=partial))
                else:
                    grad_w.addmm_(y.t(), hs)
        ctx.save_for_backward(grad_h, grad_w, rows)
        ctx.hidden = hidden.shape, hidden.dtype
        ctx.weight_dtype, ctx.scale, ctx.handed_over = weight.dtype, scale, False
        return total

    @staticmethod
    def backward(ctx, grad_loss: Tensor):  # type: ignore[override]
        factor = _backward_factor(ctx, "projected_cross_entropy", "weight gradient", grad_loss)
        grad_h, grad_w, rows = ctx.saved_tensors
        shape, dtype = ctx.hidden
        if factor is not None:  # a pass over the (small) saved gradients, not in place
            grad_h, grad_w = grad_h * factor, grad_w * factor
        grad_hidden = grad_h.new_zeros((math.prod(shape[:-1]), shape[-1]), dtype=dtype)
        grad_hidden.index_copy_(0, rows, grad_h.to(dtype))
        return grad_hidden.view(shape), grad_w.to(ctx.weight_dtype), None, None, None, None


# tokens whose logits the CUDA path holds at once: 4,096 x 37k in bf16 plus their float32
# copy, ~0.9 GB, instead of three float32 (tokens x vocabulary) tensors for the whole batch
CUDA_PROJECTION_ROWS = 4096


class _ChunkedProjectedCrossEntropy(torch.autograd.Function):
    """The output projection and the loss together on CUDA, CUDA_PROJECTION_ROWS tokens at a
    time (torchtitan's chunked loss): padding rows stay in, masked, so nothing waits on the
    host; the gradients of the states and the weight are computed in the forward pass and
    scaled by the loss's gradient in the backward pass, a device multiply (no host read)."""

    @staticmethod
    def forward(ctx, hidden: Tensor, weight: Tensor, target: Tensor, pad_id: int,  # type: ignore[override]
                eps: float) -> Tensor:  # fmt: skip
        kind = hidden.device.type
        dtype = (torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind)
                 else torch.promote_types(hidden.dtype, weight.dtype))  # fmt: skip
        with torch.autocast(kind, enabled=False):
            h = hidden.reshape(-1, hidden.shape[-1]).to(dtype)
            w, ids = weight.to(dtype), target.reshape(-1, 1)
            pad = ids.eq(pad_id)
            ids = ids.masked_fill(pad, 0)  # a pad id outside the vocabulary is ignored too
            grad_h = torch.empty_like(h)
            grad_w = torch.zeros(w.shape, dtype=torch.float32, device=h.device)
            total = torch.zeros((), dtype=torch.float32, device=h.device)
            for start in range(0, h.shape[0], CUDA_PROJECTION_ROWS):
                rows = slice(start, start + CUDA_PROJECTION_ROWS)
                y = torch.mm(h[rows], w.t())  # (rows, V) in the training dtype
                total += _block_loss_and_grad(y.float(), ids[rows], pad[rows], eps, 1.0, y)
                torch.mm(y, w, out=grad_h[rows])  # y is now the logits' gradient
                if dtype == torch.float32:
                    grad_w.addmm_(y.t(), h[rows])
                else:  # each chunk's product rounded once, summed in float32
                    grad_w.add_(torch.mm(y.t(), h[rows]))
        ctx.save_for_backward(grad_h, grad_w)
        ctx.hidden, ctx.weight_dtype = (hidden.shape, hidden.dtype), weight.dtype
        return total

    @staticmethod
    def backward(ctx, grad_loss: Tensor):  # type: ignore[override]
        first_order_only("projected_cross_entropy")
        grad_h, grad_w = ctx.saved_tensors
        shape, dtype = ctx.hidden
        grad_hidden = (grad_h * grad_loss).to(dtype).view(shape)
        return grad_hidden, (grad_w * grad_loss).to(ctx.weight_dtype), None, None, None


def projected_cross_entropy(
    hidden: Tensor, weight: Tensor, target: Tensor, pad_id: int, smoothing: float,
    grad_scale: Tensor | float | None = None,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """smoothed_cross_entropy(F.linear(hidden, weight), target, ...): the loss of the output
    projection of hidden states (B, T, D) by weight (V, D), summed over the target's real
    tokens, and their count.

    In training on a CPU the projection and the loss run together in groups of tokens
    (`_ProjectedCrossEntropy`): the logits of padding positions are never computed, and
    neither the (tokens x vocabulary) logits nor their gradient is ever held whole, which
    saves their memory and the page faults of fresh memory for them at every step. The
    gradients of `hidden` and `weight` are computed in the forward pass, in the dtype the
    projection runs in (autocast's, or the inputs'); `grad_scale` as in
    smoothed_cross_entropy. On CUDA, chunks of CUDA_PROJECTION_ROWS tokens, padding rows
    masked rather than left out (no host sync), and grad_scale applied by the backward
    pass. Elsewhere (no gradient, torch.compile, other devices) the plain path.
    """
    count = target.ne(pad_id).sum()
    grad = torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
    if code_path(hidden) == "cpu" and grad and not torch.compiler.is_compiling():
        scale = _folded_scale(grad_scale)
        loss = _ProjectedCrossEntropy.apply(hidden, weight, target, pad_id, smoothing, scale)
        return loss, count
    if code_path(hidden) == "cuda" and grad and not torch.compiler.is_compiling():
        return _ChunkedProjectedCrossEntropy.apply(hidden, weight, target, pad_id, smoothing), count
    return smoothed_cross_entropy(F.linear(hidden, weight), target, pad_id, smoothing, grad_scale)


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
    fused = code_path(logits) == "cpu" and logits.requires_grad and torch.is_grad_enabled()
    if fused and not torch.compiler.is_compiling():
        scale = _folded_scale(grad_scale)
        return _SmoothedCrossEntropy.apply(logits, target, pad_id, smoothing, scale), count
    loss = F.cross_entropy(
        logits.float().reshape(-1, logits.shape[-1]),
        target.flatten(),
        ignore_index=pad_id,
        label_smoothing=smoothing,
        reduction="sum",
    )
    return loss, count
