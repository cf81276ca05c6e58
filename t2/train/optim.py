"""Optimiser and learning-rate schedules.

Weight decay applies to weight matrices only: norms, biases and embeddings are excluded
(report 000). The optimiser is PyTorch's fused Adam or AdamW with one public addition,
`skip_if`, that skips a step on the device (train_step skips a non-finite one with no host
read). Schedules return a multiplier of the peak learning rate for LambdaLR.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from t2.config import TrainConfig


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two groups: matrices of linear layers (decayed) and everything else (not decayed)."""
    decay, no_decay, seen = [], [], set()
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            if id(p) in seen or not p.requires_grad:
                continue
            seen.add(id(p))
            is_matrix = isinstance(module, nn.Linear) and name == "weight"
            (decay if is_matrix else no_decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def peak_lr(cfg: TrainConfig, d_model: int) -> float:
    """`max_lr`, or the paper's peak d_model^-0.5 * warmup^-0.5 (7.0e-4 for base)."""
    if cfg.max_lr > 0:
        return cfg.max_lr
    return d_model**-0.5 * max(cfg.warmup_steps, 1) ** -0.5


class SkippableAdam(torch.optim.Adam):
    """Fused Adam whose next step can be skipped on the device (`skip_if`); its state and
    state_dict are torch.optim.Adam's."""

    def __init__(self, params: Any, **options: Any) -> None:
        super().__init__(params, **options, fused=True)
        self.register_step_post_hook(_forget_skip)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)  # a pickled optimiser keeps no hooks
        self.register_step_post_hook(_forget_skip)

    def skip_if(self, bad: Tensor) -> None:
        """The next step changes nothing (parameters, moments, step counts) where `bad`, a
        0-d float32 tensor on the parameters' device, is 1, and runs where it is 0: decided
        by the fused kernel, with no host read. The kernel reads `bad` as `found_inf`, the
        flag PyTorch's GradScaler sets on its own path (fp16 on CUDA), which skips by itself
        and must not call this."""
        self.found_inf = bad
        self._skip_set = True


class SkippableAdamW(SkippableAdam, torch.optim.AdamW):
    """Fused AdamW with `skip_if`."""


def _forget_skip(optimizer: SkippableAdam, args: Any, kwargs: Any) -> None:
    """After a step: the flag `skip_if` set applied to that step alone."""
    if optimizer.__dict__.pop("_skip_set", False):
        del optimizer.found_inf


def skippable(optimizer: Any) -> SkippableAdam:
    """The t2 optimiser, under Accelerate's AcceleratedOptimizer or not."""
    inner = getattr(optimizer, "optimizer", optimizer)
    if not isinstance(inner, SkippableAdam):
        raise TypeError(f"{type(inner).__name__} cannot skip a step; build_optimizer's can")
    return inner


def build_optimizer(model: nn.Module, cfg: TrainConfig, d_model: int) -> SkippableAdam:
    """Adam (the paper) or AdamW, both fused and able to skip a step (`skip_if`)."""
    cls = SkippableAdamW if cfg.optimizer == "adamw" else SkippableAdam
    return cls(
        param_groups(model, cfg.weight_decay),
        lr=peak_lr(cfg, d_model),
        betas=cfg.betas,
        eps=cfg.eps,
    )


def inverse_sqrt(step: int, warmup: int) -> float:
    """The paper's min(step^-0.5, step * warmup^-1.5), divided by its peak warmup^-0.5.

    With max_lr this is report 000's scaled schedule: the curve keeps its shape and
    peaks at max_lr at the end of warm-up.
    """
    warmup = max(warmup, 1)
    return min(math.sqrt(warmup / step), step / warmup)


def cosine(step: int, warmup: int, total: int, floor: float) -> float:
    """Linear warm-up to the peak, then a cosine decay to floor (a fraction of the peak)."""
    if step < warmup:
        return step / max(warmup, 1)
    progress = min(1.0, (step - warmup) / max(total - warmup, 1))
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def lr_multiplier(cfg: TrainConfig, d_model: int) -> Callable[[int], float]:
    """LambdaLR's function of the number of steps taken; update k (1-based) uses k."""
    if cfg.schedule == "cosine":
        floor = cfg.min_lr / peak_lr(cfg, d_model)
        return lambda taken: cosine(taken + 1, cfg.warmup_steps, cfg.max_steps, floor)
    return lambda taken: inverse_sqrt(taken + 1, cfg.warmup_steps)


def build_scheduler(
    optimizer: torch.optim.Optimizer, cfg: TrainConfig, d_model: int
) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_multiplier(cfg, d_model))
