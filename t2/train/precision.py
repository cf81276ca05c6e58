"""train.cast_weights: the linear layers' weights in the autocast dtype, cast from their
float32 master once per optimizer step instead of by autocast at every call.

Under autocast every linear layer casts its float32 weight and bias to bf16 at each call
and its backward pass casts their bf16 gradients back: two casts a parameter in every
micro-batch (base: 264 of the 374 `_to_copy` calls of a step, tests/test_train_precision.py).
Here the model that trains holds those parameters in bf16 already, the same rounding
autocast applies, so the forward pass computes the same numbers; its other parameters
(embeddings, norms) are the master's own, trained in float32 as before. Once per step
the bf16 gradients are copied into the master's float32 gradients (one grouped copy),
the optimizer updates the float32 master and its Adam state, and the bf16 weights are
refreshed from it (one grouped copy): fairseq's `--bf16` keeps such an fp32 master copy in
its FP16Optimizer, and FSDP2's MixedPrecisionPolicy(param_dtype=bf16) casts parameters as
one grouped copy. The master is what checkpoints save and what validation and decoding
use. One difference: micro-batches accumulated in a step (and DDP's all-reduce) sum
these gradients in bf16, as fairseq's --bf16 does, where autocast summed them in float32.
"""

from __future__ import annotations

import copy

import torch
from torch import nn


def wanted(setting: bool | str, device_kind: str, mixed_precision: str, compiled: bool) -> bool:
    """Whether train.cast_weights (`true`, `false` or `auto`) applies: `auto` on CUDA
    under bf16 autocast when the step runs eagerly, where the host's time per cast is the
    cost (docs/performance.md); not when it is compiled, where the casts are fused into
    the graph's kernels and casting once would only cost a bf16 copy of the weights (2
    bytes a parameter, 4 with its gradient) and bf16 gradient sums; never without bf16
    (fp16 has its loss scaler, fp32 nothing to cast)."""
    if mixed_precision != "bf16":
        return False
    return device_kind == "cuda" and not compiled if setting == "auto" else bool(setting)


class ComputeWeights:
    """A copy of `master` to train with: its linear layers' parameters in `dtype`, all its
    other parameters shared with `master` (their gradients are the master's)."""

    def __init__(self, master: nn.Module, dtype: torch.dtype = torch.bfloat16) -> None:
        self.master, self.module = master, copy.deepcopy(master)
        self.pairs: list[tuple[nn.Parameter, nn.Parameter]] = []  # (master, compute)
        for ours, theirs in zip(master.modules(), self.module.modules(), strict=True):
            for name, param in ours.named_parameters(recurse=False):
                if isinstance(ours, nn.Linear):
                    low = nn.Parameter(param.detach().to(dtype), param.requires_grad)
                    setattr(theirs, name, low)
                    self.pairs.append((param, low))
                else:
                    setattr(theirs, name, param)
        self.module.train()

    @torch.no_grad()
    def refresh(self) -> None:
        """The compute weights from the master's (after an optimizer step or a load)."""
        torch._foreach_copy_([c for _, c in self.pairs], [m for m, _ in self.pairs])

    @torch.no_grad()
    def gradients_to_master(self, keep: bool = False) -> None:
        """The step's gradients of the compute weights into the master's .grad (float32),
        in one grouped copy; the compute gradients are released, or zeroed in place with
        `keep` (CUDA graphs: gradients stay in buffers of their own)."""
        pairs = [(m, c) for m, c in self.pairs if c.grad is not None]
        for m, _ in pairs:
            if m.grad is None:
                m.grad = torch.empty_like(m)
        torch._foreach_copy_([m.grad for m, _ in pairs], [c.grad for _, c in pairs])
        if keep:
            torch._foreach_zero_([c.grad for _, c in pairs])
            return
        for _, c in pairs:
            c.grad = None
