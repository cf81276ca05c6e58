"""Label-smoothed cross-entropy (Szegedy et al. 2016; the paper's eps_ls = 0.1)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def smoothed_cross_entropy(
    logits: torch.Tensor, target: torch.Tensor, pad_id: int, smoothing: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum of label-smoothed token losses, ignoring padding, and the number of target tokens.

    logits (B, T, V) are upcast to float32 so that a bf16 forward pass keeps an exact loss.
    Returns tensors (no host sync): divide the sum by the count for the mean.
    """
    loss = F.cross_entropy(
        logits.float().flatten(0, 1),
        target.flatten(),
        ignore_index=pad_id,
        label_smoothing=smoothing,
        reduction="sum",
    )
    return loss, target.ne(pad_id).sum()
