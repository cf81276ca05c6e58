"""The CPU's blockwise label-smoothed cross-entropy (see t2/model/loss.py for the formula and
why): the loss and its gradient computed together, CHUNK_ROWS tokens at a time, during the
forward pass, the gradient kept in the logits' dtype; and the output projection folded in,
PROJECTION_ROWS tokens at a time, so that no (tokens x vocabulary) tensor exists at all."""

from __future__ import annotations

import math

import torch

from t2.model.fused import first_order_only

Tensor = torch.Tensor

CHUNK_ROWS = 128  # tokens per block: 128 x 8k float32 = 4 MiB, within a CPU's L2 + L3 share
# tokens whose logits projected_cross_entropy holds at once: 1,024 x 8k bf16 = 16 MiB, under
# glibc's largest mmap threshold (32 MiB), so its buffers come from the heap, not fresh pages
PROJECTION_ROWS = 1024


def block_loss_and_grad(
    x: Tensor, target: Tensor, pad: Tensor, eps: float, scale: float, out: Tensor
) -> Tensor:
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


def projection_dtype(hidden: Tensor, weight: Tensor) -> torch.dtype:
    """The dtype the output projection runs in, as F.linear would: autocast's, else the
    inputs' promoted type."""
    kind = hidden.device.type
    if torch.is_autocast_enabled(kind):
        return torch.get_autocast_dtype(kind)
    return torch.promote_types(hidden.dtype, weight.dtype)


def folded_scale(grad_scale: Tensor | float | None) -> float | None:
    """grad_scale as a float (a CPU tensor's value: no device sync on this CPU-only path).
    Zero is refused: the folded gradient would be all zeros, and no later factor could
    bring it back."""
    if grad_scale is None:
        return None
    scale = float(grad_scale)
    if scale == 0.0:
        raise ValueError(
            "grad_scale=0 would fold a zero gradient into the loss; leave it "
            "unset, or multiply the loss by 0 after the call"
        )
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


class SmoothedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx,
        logits: Tensor,
        target: Tensor,
        pad_id: int,
        eps: float,  # type: ignore[override]
        scale: float | None,
    ) -> Tensor:
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
            total += block_loss_and_grad(x, t.masked_fill(pad, 0), pad, eps, factor, grad[rows])
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


class ProjectedCrossEntropy(torch.autograd.Function):
    """The output projection and the loss together, PROJECTION_ROWS tokens at a time: each
    group's logits are computed into one reused buffer, overwritten block by block with
    their scaled gradient, and turned at once into the group's share of the gradients of
    the hidden states and of the weight. The (tokens x vocabulary) logits and gradient never
    exist whole, and tokens whose target is padding are left out before the projection."""

    @staticmethod
    def forward(
        ctx,
        hidden: Tensor,
        weight: Tensor,
        target: Tensor,
        pad_id: int,  # type: ignore[override]
        eps: float,
        scale: float | None,
    ) -> Tensor:
        kind, dtype = hidden.device.type, projection_dtype(hidden, weight)
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
                    total += block_loss_and_grad(x, t, no_pad[: t.shape[0]], eps, factor, yb)
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
