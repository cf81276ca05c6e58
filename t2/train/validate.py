"""Validation: teacher-forced loss and token accuracy, and sacreBLEU of greedy output."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from typing import Any

import torch

from t2.decoding.options import DecodeConfig
from t2.evaluation.forced import teacher_forced
from t2.evaluation.scoring import score_corpus
from t2.serve.engine import translate


def forced_summary(
    model: torch.nn.Module, loader: Any, pad_id: int, device: torch.device
) -> dict[str, float]:
    """Per-token cross-entropy (no smoothing), perplexity and next-token accuracy of the
    model in eval mode: the logged part of t2.evaluation.forced.teacher_forced."""
    model.eval()
    figures = teacher_forced(model, loader, pad_id, device)
    return {k: figures[k] for k in ("loss", "ppl", "accuracy")}


def greedy_scores(
    model: torch.nn.Module,
    tokenizer: Any,
    sources: list[str],
    references: list[str],
    decode: DecodeConfig,
    device: torch.device,
    src_bos: bool,
) -> dict[str, Any]:
    """BLEU, chrF and exact match of greedy translations of `sources`."""
    greedy = replace(decode, search="greedy", nbest=1)
    hyps = translate(model, tokenizer, sources, greedy, src_bos, device)
    return score_translations(hyps, references)


def score_translations(hyps: list[str], references: list[str]) -> dict[str, Any]:
    """sacreBLEU's BLEU and chrF with signatures, and the share of exact matches."""
    scores = score_corpus(hyps, [references]).to_dict()
    exact = sum(h.strip() == r.strip() for h, r in zip(hyps, references, strict=True))
    return {**scores, "exact_match": exact / max(len(references), 1)}


def final_evaluation(
    model: torch.nn.Module,
    tokenizer: Any,
    pairs: Any,
    loader: Any,
    decode: DecodeConfig,
    device: torch.device,
    src_bos: bool,
    autocast: Callable[[], AbstractContextManager] = nullcontext,
) -> tuple[dict[str, Any], list[str]]:
    """The test split: teacher-forced figures (under `autocast`: the training's precision, as
    validation computes them) and the scores of `decode`'s search, then its translations."""
    with autocast():
        figures = forced_summary(model, loader, tokenizer.pad_token_id, device)
    results = {f"test_{k}": v for k, v in figures.items()}
    hyps = translate(model, tokenizer, list(pairs["src"]), decode, src_bos, device)
    results.update(score_translations(hyps, list(pairs["tgt"])))
    results.update({"n_sentences": len(hyps), "decode": decode.recorded()})
    return results, hyps
