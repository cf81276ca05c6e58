"""Teacher-forced figures of a model on reference pairs: per-token cross-entropy (no
smoothing), perplexity, next-token accuracy and accuracy per target position. Shared by
validation during training, the final test scores and the robustness suite."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch
import torch.nn.functional as F

from t2.model.loss import smoothed_cross_entropy


@torch.no_grad()
def teacher_forced(
    model: torch.nn.Module,
    batches: Iterable[dict[str, torch.Tensor]],
    pad_id: int,
    device: torch.device | str,
) -> dict[str, Any]:
    """Sums stay on the device over all batches (collated src, tgt_in, tgt_out); one
    synchronisation at the end."""
    loss = tokens = correct = torch.zeros((), device=device)
    hits_at = total_at = torch.zeros(0, device=device)  # per target position
    for batch in batches:
        batch = {k: v.to(device) for k, v in batch.items()}
        logits = model(batch["src"], batch["tgt_in"])  # (B, T, V)
        batch_loss, n = smoothed_cross_entropy(logits, batch["tgt_out"], pad_id, 0.0)
        real = batch["tgt_out"].ne(pad_id)  # (B, T)
        hits = logits.argmax(-1).eq(batch["tgt_out"]) & real
        loss, tokens, correct = loss + batch_loss, tokens + n, correct + hits.sum()
        width = max(hits_at.numel(), real.shape[1])
        hits_at = F.pad(hits_at, (0, width - hits_at.numel())) + F.pad(
            hits.sum(0).float(), (0, width - real.shape[1])
        )
        total_at = F.pad(total_at, (0, width - total_at.numel())) + F.pad(
            real.sum(0).float(), (0, width - real.shape[1])
        )
    n_tokens = max(tokens.item(), 1.0)
    mean = loss.item() / n_tokens
    position = [h / t for h, t in zip(hits_at.tolist(), total_at.tolist(), strict=True) if t]
    return {
        "loss": mean,
        "ppl": math.exp(mean) if mean < 700 else math.inf,
        "accuracy": correct.item() / n_tokens,
        "position_accuracy": position,
    }
