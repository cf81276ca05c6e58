"""The output projection and the label-smoothed loss together on CUDA, in chunks of tokens
with padding masked rather than left out, so that nothing waits on the host."""

from __future__ import annotations

import torch

from t2.model.fused import first_order_only
from t2.model.loss_blocks import block_loss_and_grad, projection_dtype

Tensor = torch.Tensor

# tokens whose logits the CUDA path holds at once: 4,096 x 37k in bf16 plus their float32
# copy, ~0.9 GB, instead of three float32 (tokens x vocabulary) tensors for the whole batch
CUDA_PROJECTION_ROWS = 4096


class ChunkedProjectedCrossEntropy(torch.autograd.Function):
    """The output projection and the loss together on CUDA, CUDA_PROJECTION_ROWS tokens at a
    time (torchtitan's chunked loss): padding rows stay in, masked, so nothing waits on the
    host; the gradients of the states and the weight are computed in the forward pass and
    scaled by the loss's gradient in the backward pass, a device multiply (no host read)."""

    @staticmethod
    def forward(
        ctx,
        hidden: Tensor,
        weight: Tensor,
        target: Tensor,
        pad_id: int,  # type: ignore[override]
        eps: float,
    ) -> Tensor:
        kind, dtype = hidden.device.type, projection_dtype(hidden, weight)
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
                total += block_loss_and_grad(y.float(), ids[rows], pad[rows], eps, 1.0, y)
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
