"""One optimizer step over `accumulate` micro-batches, with no host-device synchronisation.

The loss is summed over tokens and divided by the number of target tokens of the whole
step (all micro-batches of all processes), so N processes, or one process accumulating N
micro-batches, compute the same update (fairseq's normalisation). A step whose gradient
norm is not finite is skipped on the device by the optimiser's `skip_if` (t2.train.optim).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from accelerate import Accelerator

from t2.train.compiling import TrainingForward
from t2.train.optim import skippable

Tensor = torch.Tensor


@dataclass
class StepStats:
    """Device-side running sums, read (one synchronisation) only when logging."""

    loss: Tensor
    tokens: Tensor
    skipped: Tensor
    bad_run: Tensor  # consecutive non-finite steps

    @classmethod
    def zeros(cls, device: torch.device, bad_run: Tensor | None = None) -> StepStats:
        """New sums; a run of non-finite steps goes on across logging intervals."""
        z = lambda: torch.zeros((), device=device)  # noqa: E731
        return cls(z(), z(), z(), z() if bad_run is None else bad_run)

    @classmethod
    def restored(
        cls, saved: dict[str, float] | None, device: torch.device, bad_run: Tensor
    ) -> StepStats:
        """The sums a checkpoint between two logging steps saved (state()), else zeros."""
        stats = cls.zeros(device, bad_run)
        for name, value in (saved or {}).items():
            getattr(stats, name).fill_(value)
        return stats

    def state(self) -> dict[str, float]:
        """The sums since the last logged step (a host read: checkpoints only)."""
        return {
            "loss": self.loss.item(),
            "tokens": self.tokens.item(),
            "skipped": self.skipped.item(),
        }


def train_step(
    accelerator: Accelerator,
    forward: TrainingForward,
    optimizer: torch.optim.Optimizer,
    micro_batches: list[dict[str, Tensor]],
    pad_id: int,
    smoothing: float,
    clip_norm: float,
    stats: StepStats,
) -> None:
    device, model = accelerator.device, forward.model
    seeds = [int(b["seed"]) if "seed" in b else None for b in micro_batches]  # host tensors
    batches = [
        {k: v.to(device, non_blocking=True) for k, v in b.items() if k != "seed"}
        for b in micro_batches
    ]
    # target tokens of the whole step, counted and reduced on the device: no host round trip
    local_tokens = torch.stack([b["tgt_out"].ne(pad_id).sum() for b in batches]).sum().float()
    total = accelerator.reduce(local_tokens.clone(), "sum")
    scale = accelerator.num_processes / total.clamp(min=1.0)  # DDP averages gradients
    step_loss = torch.zeros((), device=device)
    for i, batch in enumerate(batches):
        last = i == len(batches) - 1
        sync = contextlib.nullcontext() if last else accelerator.no_sync(model)
        if seeds[i] is not None:  # dropout follows the global batch, not the process
            torch.manual_seed(seeds[i])
        with sync:  # the projection in bf16 under autocast (t2.train.setup.prepare_model)
            loss = forward.run(batch, smoothing, scale, accelerator.backward, accelerator.autocast)
        step_loss += loss
    forward.after_backward()  # bf16 compute weights: their gradients to the fp32 master
    params = [p for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
    if clip_norm > 0:
        norm = accelerator.clip_grad_norm_(params, clip_norm)
    else:
        accelerator.unscale_gradients()
        norm = torch.nn.utils.get_total_norm([p.grad for p in params])
    bad = (~torch.isfinite(norm)).float()
    if accelerator.scaler is None:  # a GradScaler (fp16 on CUDA) does its own skipping
        skippable(optimizer).skip_if(bad)
    optimizer.step()
    optimizer.zero_grad(set_to_none=not forward.keeps_gradients)
    forward.after_update()
    stats.loss += torch.where(bad.bool(), 0.0, step_loss)  # skipped steps do not count
    stats.tokens += (1.0 - bad) * local_tokens
    stats.skipped += bad
    stats.bad_run.mul_(bad).add_(bad)
