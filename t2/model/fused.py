"""Autograd functions that save fewer activations than the plain PyTorch composition.

Training memory is dominated by the tensors autograd saves for the backward pass. Composed
from elementwise PyTorch ops, RMSNorm, rotary embeddings and the gated feed-forward each
save intermediate results the gradient can cheaply recompute; these functions compute the
same values and gradients (tests/test_model_fused.py checks both against the plain
formulas) while saving only what is needed:

- `rms_norm`: the input and the per-row 1/rms (the composition also keeps x / rms).
- `rotate_qk`: nothing; the rotation is orthogonal, so its backward rotates the gradient
  back. Applied to the fused (q, k, v) projection at once, so that attention keeps one
  (q, k, v) buffer alive instead of the rotated q and k plus the unrotated projection.
- `gated_projection`: W2(act(a) * b) saving a and b; act(a) * b is recomputed in the
  backward pass (elementwise, cheap) instead of being kept twice.
- `Dropout` on a CPU: a boolean keep-mask from 16 random bits an element, four elements to
  each 64-bit draw of the generator (PyTorch's CPU dropout draws one float per element with
  `bernoulli_`, about 5x slower, and saves the mask at the input's width). p is rounded to
  a multiple of 1/65536 and the kept values are scaled by 1 / (1 - that p), so the output's
  expectation is still the input. On a GPU PyTorch's fused dropout already saves a boolean
  mask and is used as is.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from t2.model.codepath import code_path

Tensor = torch.Tensor


class _RMSNorm(torch.autograd.Function):
    """Each pass writes into a tensor the previous one made, where it can: on a CPU every
    fresh (tokens x d_model) float32 tensor costs page faults as well as its pass. Autocast
    is off inside: it would run vecdot in 16 bits (and overflow fp16's sums of squares)."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, eps: float) -> Tensor:  # type: ignore[override]
        with torch.autocast(x.device.type, enabled=False):
            x32 = x.to(torch.promote_types(x.dtype, torch.float32))  # bf16/fp16 -> fp32
            mean_square = torch.linalg.vecdot(x32, x32).unsqueeze_(-1).div_(x.shape[-1])
            rstd = mean_square.add_(eps).rsqrt_()
            ctx.save_for_backward(x, weight, rstd)
            return torch.mul(x32, rstd).mul_(weight).to(x.dtype)

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        x, weight, rstd = ctx.saved_tensors
        with torch.autocast(x.device.type, enabled=False):
            xhat, g = torch.mul(x, rstd), grad.to(rstd.dtype)  # xhat in float32
            gw = torch.mul(g, weight)
            grad_weight = None
            if ctx.needs_input_grad[1]:
                grad_weight = g.mul(xhat).flatten(0, -2).sum(0).to(weight.dtype)
            dot = torch.linalg.vecdot(gw, xhat).unsqueeze_(-1).div_(x.shape[-1])
            grad_x = xhat.mul_(dot).neg_().add_(gw).mul_(rstd)  # rstd (gw - xhat mean(gw xhat))
            return grad_x.to(x.dtype), grad_weight, None


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """weight * x / sqrt(mean(x^2) + eps) over the last dimension, computed in float32 and
    returned in x's dtype; saves x and 1/rms for the backward pass."""
    no_grad = not torch.is_grad_enabled() or not (x.requires_grad or weight.requires_grad)
    if no_grad or torch.compiler.is_compiling():  # the compiler fuses and recomputes itself
        return F.rms_norm(x, (x.shape[-1],), weight.to(x.dtype), eps)  # PyTorch's kernel
    if code_path(x) == "cuda":  # one fused kernel each way (PyTorch >= 2.8), in float32
        with torch.autocast("cuda", enabled=False):
            return F.rms_norm(x.float(), (x.shape[-1],), weight, eps).to(x.dtype)
    return _RMSNorm.apply(x, weight, eps)


def rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """RoPE's rotation of x (..., T, Dh) by (T, Dh) tables: x cos + rotate_half(x) sin, with
    rotate_half(x) = (-x2, x1) for the halves x1, x2 of Dh."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


def first_order_only(name: str) -> None:
    """Called at the top of a backward that computes its gradient with no graph: autograd
    runs backward with grad mode on only for create_graph=True, where such a gradient would
    silently count as a constant (a second derivative of zero)."""
    if torch.is_grad_enabled():
        raise RuntimeError(
            f"{name} has no second derivative (create_graph=True); "
            f"differentiate the plain PyTorch formula instead"
        )


def _rotate_into(qkv: Tensor, cos: Tensor, sin: Tensor, out: Tensor | None = None) -> Tensor:
    """out[:2] = the rotation of qkv[:2] by the tables, out[2] = qkv[2]; returns out (a new
    contiguous tensor if not given).

    With halves x1, x2 of Dh and c, s the first half of the tables (rope_tables repeats
    the angles over both halves): (x1 c - x2 s, x2 c + x1 s), written straight into out
    with one multiply and one fused multiply-add per half, from any strides of qkv (the
    projection's (B, T, 3, H, Dh) layout seen as (3, B, H, T, Dh)) to any strides of out.
    """
    if out is None:
        out = torch.empty(qkv.shape, dtype=qkv.dtype, device=qkv.device)
    half = qkv.shape[-1] // 2
    c, s = cos[..., :half], sin[..., :half]
    x1, x2 = qkv[:2, ..., :half], qkv[:2, ..., half:]
    o1, o2 = out[:2, ..., :half], out[:2, ..., half:]
    torch.mul(x1, c, out=o1).addcmul_(x2, s, value=-1)
    torch.mul(x2, c, out=o2).addcmul_(x1, s)
    out[2].copy_(qkv[2])
    return out


class _RotateQK(torch.autograd.Function):
    @staticmethod
    def forward(ctx, qkv: Tensor, cos: Tensor, sin: Tensor) -> Tensor:  # type: ignore[override]
        ctx.save_for_backward(cos, sin)
        # the input's strides where they are dense and non-overlapping (the projection's
        # permuted view), else contiguous ones: an expanded input gets a writable gradient
        ctx.layout = qkv.shape, torch.empty_like(qkv, device="meta").stride()
        return _rotate_into(qkv, cos, sin)

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        first_order_only("rotate_qk")
        cos, sin = ctx.saved_tensors
        # the inverse rotation, R(-theta) = R(theta)^T, into the input's own layout: the
        # projection's gradient is then contiguous without another copy
        out = torch.empty_strided(*ctx.layout, dtype=grad.dtype, device=grad.device)
        return _rotate_into(grad, cos, -sin, out), None, None


def rotate_qk(qkv: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """qkv (3, B, H, T, Dh) -> a new contiguous (3, B, H, T, Dh) with q and k rotated by
    the (T, Dh) tables cos and sin and v copied; saves no activation."""
    if torch.compiler.is_compiling():
        return torch.cat([rotary(qkv[:2], cos, sin), qkv[2:]])
    if not torch.is_grad_enabled() or not qkv.requires_grad:
        return _rotate_into(qkv, cos, sin)
    return _RotateQK.apply(qkv, cos, sin)


class _GatedProjection(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx,
        a: Tensor,
        b: Tensor,
        weight: Tensor,
        bias: Tensor | None,  # type: ignore[override]
        act: Callable[[Tensor], Tensor],
    ) -> Tensor:
        ctx.save_for_backward(a, b, weight)
        ctx.act, ctx.bias_dtype = act, None if bias is None else bias.dtype
        h = act(a)  # in place only on a tensor of its own (an identity act returns a)
        h = h.mul_(b) if h.untyped_storage().data_ptr() != a.untyped_storage().data_ptr() else h * b
        return F.linear(h, weight, bias)  # under autocast: the autocast dtype

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        a, b, weight = ctx.saved_tensors
        with torch.enable_grad():  # recompute act(a) * b and its local gradient
            a_, b_ = a.detach().requires_grad_(), b.detach().requires_grad_()
            h = ctx.act(a_) * b_
        grad_h = grad.to(h.dtype).matmul(weight.to(h.dtype))
        grad_a, grad_b = torch.autograd.grad(h, (a_, b_), grad_h)
        flat_grad = grad.flatten(0, -2)
        grad_weight = flat_grad.t().matmul(h.detach().flatten(0, -2).to(grad.dtype))
        grad_bias = None if ctx.bias_dtype is None else flat_grad.to(ctx.bias_dtype).sum(0)
        return grad_a, grad_b, grad_weight.to(weight.dtype), grad_bias, None


def gated_projection(
    a: Tensor, b: Tensor, linear: torch.nn.Linear, act: Callable[[Tensor], Tensor]
) -> Tensor:
    """linear(act(a) * b), saving a and b only (act(a) * b is recomputed in backward)."""
    if torch.compiler.is_compiling() or not torch.is_grad_enabled():
        return linear(act(a) * b)
    return _GatedProjection.apply(a, b, linear.weight, linear.bias, act)


MASK_LEVELS = 1 << 16  # dropout draws 16 bits an element: p in steps of 1/65536


def keep_mask(shape: torch.Size, p: float, device: torch.device) -> tuple[Tensor, float]:
    """A boolean mask that is False with probability q = round(p * 65536) / 65536, and q.

    Each 64-bit draw of the generator gives four elements 16 uniform bits each (viewed as
    int16: uniform on [-32768, 32767]); an element is dropped when its bits fall in the
    lowest q * 65536 values. One draw per four elements instead of a float per element.
    """
    n, dropped = shape.numel(), round(p * MASK_LEVELS)
    bits = torch.empty((n + 3) // 4, dtype=torch.int64, device=device)
    lanes = bits.random_(-(2**63), None).view(torch.int16)[:n]  # the full 64-bit range
    return lanes.view(shape) >= dropped - MASK_LEVELS // 2, dropped / MASK_LEVELS


class _Dropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, p: float) -> Tensor:  # type: ignore[override]
        keep, q = keep_mask(x.shape, p, x.device)  # P(keep) = 1 - q, q = p to 1/65536
        ctx.save_for_backward(keep)
        ctx.scale = 1.0 / (1.0 - q)
        return (x * keep).mul_(ctx.scale)

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        (keep,) = ctx.saved_tensors
        return (grad * keep).mul_(ctx.scale), None


class Dropout(torch.nn.Dropout):
    """nn.Dropout (inverted dropout: zero with probability p, scale the rest by 1/(1-p))
    that saves a boolean mask on a CPU; elsewhere, or with p within 1/131072 of 0 or 1,
    PyTorch's own."""

    def forward(self, x: Tensor) -> Tensor:
        plain = torch.compiler.is_compiling() or code_path(x) != "cpu" or self.inplace
        if plain or not self.training or not 0 < round(self.p * MASK_LEVELS) < MASK_LEVELS:
            return super().forward(x)
        return _Dropout.apply(x, self.p)
