"""Validation: teacher-forced loss and token accuracy, and sacreBLEU of greedy output."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from t2.config import DecodeConfig
from t2.model.loss import smoothed_cross_entropy


@torch.no_grad()
def teacher_forced(
    model: torch.nn.Module, loader: Any, pad_id: int, device: torch.device
) -> dict[str, float]:
    """Per-token cross-entropy (no smoothing), perplexity and next-token accuracy."""
    model.eval()
    loss = tokens = correct = torch.zeros((), device=device)
    for batch in loader:
        batch = {k: v.to(device) for k, v in batch.items()}
        logits = model(batch["src"], batch["tgt_in"])
        batch_loss, n = smoothed_cross_entropy(logits, batch["tgt_out"], pad_id, 0.0)
        real = batch["tgt_out"].ne(pad_id)
        loss = loss + batch_loss
        tokens = tokens + n
        correct = correct + (logits.argmax(-1).eq(batch["tgt_out"]) & real).sum()
    n_tokens = max(tokens.item(), 1.0)
    mean = loss.item() / n_tokens
    return {
        "loss": mean,
        "ppl": float(torch.tensor(mean).exp()),
        "accuracy": correct.item() / n_tokens,
    }


def greedy_scores(
    model: torch.nn.Module, tokenizer: Any, sources: list[str], references: list[str],
    decode: DecodeConfig, device: torch.device, src_bos: bool,
) -> dict[str, Any]:  # fmt: skip
    """BLEU, chrF and exact match of greedy translations of `sources`."""
    from t2.evaluation.evaluate import translate

    hyps = translate(model, tokenizer, sources, replace(decode, beam_size=1), device, src_bos)
    return score_translations(hyps, references)


def score_translations(hyps: list[str], references: list[str]) -> dict[str, Any]:
    """sacreBLEU's BLEU and chrF with signatures, and the share of exact matches."""
    from t2.evaluation.scoring import score_corpus

    scores = score_corpus(hyps, [references]).to_dict()
    exact = sum(h.strip() == r.strip() for h, r in zip(hyps, references, strict=True))
    return {**scores, "exact_match": exact / max(len(references), 1)}


def final_evaluation(
    model: torch.nn.Module, tokenizer: Any, pairs: Any, loader: Any, decode: DecodeConfig,
    device: torch.device, src_bos: bool,
) -> dict[str, Any]:  # fmt: skip
    """The test split: teacher-forced figures and the scores of `decode`'s search."""
    from t2.evaluation.evaluate import translate

    results = {f"test_{k}": v for k, v in teacher_forced(model, loader, tokenizer.pad_token_id,
                                                          device).items()}  # fmt: skip
    hyps = translate(model, tokenizer, list(pairs["src"]), decode, device, src_bos)
    results.update(score_translations(hyps, list(pairs["tgt"])))
    results.update({"n_sentences": len(hyps), "beam_size": decode.beam_size})
    return results
