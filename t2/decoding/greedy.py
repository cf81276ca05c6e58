"""Searches that extend each sentence by one token a step: greedy (the most probable token)
and sampling (a token drawn from the model's distribution, for back-translation: Edunov et
al. 2018, arXiv:1808.09381, found sampled sources train better than beam ones).

Both decode the whole batch with one DecoderState; a sentence that has ended leaves the
batch through `state.reorder`, so the work per step shrinks as sentences finish.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from t2.decoding.common import (
    NEG_INF,
    Hypothesis,
    Scratch,
    force_eos,
    hypotheses,
    max_lengths,
    next_logprobs,
    pad_source,
    penalty,
)  # fmt: skip
from t2.model.transformer import Transformer
from t2.registry import SEARCH
from t2.specials import BOS, EOS, PAD

if TYPE_CHECKING:  # the options import this module to register its strategies
    from t2.decoding.options import DecodeConfig

Tensor = torch.Tensor
Choose = Callable[[Tensor], tuple[Tensor, Tensor]]  # (N, V) log-probs -> (N,) log-prob, token


def _step_by_step(
    model: Transformer, src: Tensor, max_len: Tensor | None, max_len_a: float, max_len_b: int,
    choose: Choose,
) -> tuple[list[list[int]], list[float]]:  # fmt: skip
    """Generated ids (EOS and PAD after) and summed log-probabilities of each sentence,
    one token a step chosen by `choose`."""
    B = src.shape[0]  # noqa: N806
    src = pad_source(model, src)
    src_pad = src.eq(PAD)
    memory = model.encode(src, src_pad)
    max_len = max_len if max_len is not None else max_lengths(model, src, max_len_a, max_len_b)
    steps = int(max_len.max()) + 1
    out = torch.full((B, steps), PAD, dtype=torch.long, device=src.device)
    log_prob = torch.zeros(B, device=src.device)
    rows = torch.arange(B, device=src.device)  # original sentence of each active row
    last = torch.full((B,), BOS, dtype=torch.long, device=src.device)
    state, scratch = model.new_state(steps), Scratch(B)
    shortest = int(max_len.min())  # rows at their maximum length from this step on
    for t in range(steps):
        lprobs = next_logprobs(model, last, memory, src_pad, state, scratch)
        if t >= shortest:
            lprobs = force_eos(lprobs, t >= max_len)
        best, last = choose(lprobs)  # (N,)
        out[rows, t] = last
        log_prob[rows] += best
        ended = last.eq(EOS)
        if bool(ended.any()):  # the one host sync per step: drop finished sentences
            keep = (~ended).nonzero().squeeze(1)
            if keep.numel() == 0:
                break
            state.reorder(keep)
            rows, last, memory, src_pad = rows[keep], last[keep], memory[keep], src_pad[keep]
            max_len = max_len[keep]
            shortest = int(max_len.min())
    return out.tolist(), log_prob.tolist()


def _most_probable(lprobs: Tensor) -> tuple[Tensor, Tensor]:
    return lprobs.max(dim=-1)


@torch.no_grad()
def greedy_search(
    model: Transformer,
    src: Tensor,
    max_len_a: float = 1.0,
    max_len_b: int = 50,
    lenpen: float = 0.6,
    lengths: Tensor | None = None,
    length_norm: str = "length",
) -> list[list[Hypothesis]]:
    """The most probable next token at every step; src (B, S) padded ids on the model's device.
    `lenpen` and `length_norm` only scale the reported score; `lengths` (B,) overrides the maximum
    lengths."""
    tokens, log_probs = _step_by_step(model, src, lengths, max_len_a, max_len_b, _most_probable)
    return [[h] for h in hypotheses(tokens, log_probs, penalty(lenpen, length_norm))]


def sampler(
    temperature: float, top_k: int, top_p: float, generator: torch.Generator | None
) -> Choose:
    """Draw each next token from softmax(log p / temperature), restricted to the `top_k`
    most probable (0: all) and to the smallest set whose probability reaches `top_p`
    (nucleus sampling, Holtzman et al. 2020); the log-probability kept is the model's own."""

    def choose(lprobs: Tensor) -> tuple[Tensor, Tensor]:
        logits = lprobs / temperature
        if 0 < top_k < logits.shape[-1]:
            kth = logits.topk(top_k, dim=-1).values[:, -1:]  # (N, 1)
            logits = logits.masked_fill(logits < kth, NEG_INF)
        if top_p < 1.0:
            ordered, index = logits.sort(dim=-1, descending=True)
            before = ordered.softmax(dim=-1).cumsum(dim=-1) - ordered.softmax(dim=-1)
            ordered = ordered.masked_fill(before >= top_p, NEG_INF)  # the first always stays
            logits = torch.full_like(logits, NEG_INF).scatter(-1, index, ordered)
        token = torch.multinomial(logits.softmax(dim=-1), 1, generator=generator).squeeze(1)
        return lprobs.gather(1, token[:, None]).squeeze(1), token

    return choose


@torch.no_grad()
def sample_search(
    model: Transformer, src: Tensor, cfg: DecodeConfig, generator: torch.Generator | None = None
) -> list[list[Hypothesis]]:
    """cfg.nbest samples of each sentence, best score first; reproducible for a given
    `generator` state (default: one seeded with cfg.seed)."""
    if generator is None:
        generator = torch.Generator(src.device).manual_seed(cfg.seed)
    n = cfg.nbest
    choose = sampler(cfg.temperature, cfg.top_k, cfg.top_p, generator)
    rows = src.repeat_interleave(n, dim=0)  # the n samples of a sentence are adjacent rows
    tokens, log_probs = _step_by_step(model, rows, None, cfg.max_len_a, cfg.max_len_b, choose)
    flat = hypotheses(tokens, log_probs, penalty(cfg.lenpen, cfg.length_norm))
    return [sorted(flat[i : i + n], key=lambda h: -h.score) for i in range(0, len(flat), n)]


@SEARCH.register("greedy")
def greedy(
    model: Transformer, src: Tensor, cfg: DecodeConfig, generator: torch.Generator | None = None
) -> list[list[Hypothesis]]:
    """The most probable token at every step (beam_size plays no part)."""
    return greedy_search(model, src, cfg.max_len_a, cfg.max_len_b, cfg.lenpen,
                         length_norm=cfg.length_norm)  # fmt: skip


SEARCH.register("sample")(sample_search)
