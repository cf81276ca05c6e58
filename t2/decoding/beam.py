"""Batched beam search (batch x beam rows in one key/value cache), hypotheses compared by
their summed log-probability over the length penalty (t2.decoding.common).

The first step runs on one row per sentence, then the cache is expanded to K beams; a
sentence leaves the batch when it is done, so the work per step shrinks as sentences end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from t2.decoding.common import (
    NEG_INF,
    Hypothesis,
    Penalty,
    Scratch,
    force_eos,
    hypotheses,
    max_lengths,
    next_logprobs,
    pad_source,
    penalty,
)  # fmt: skip
from t2.decoding.greedy import greedy
from t2.model.transformer import DecoderState, Transformer
from t2.registry import SEARCH
from t2.specials import BOS, EOS, PAD

if TYPE_CHECKING:  # the options import this module to register its strategy
    from t2.decoding.options import DecodeConfig

Tensor = torch.Tensor


@dataclass
class _Finished:
    """The best `k` ended hypotheses of each active sentence, kept on the device."""

    score: Tensor  # (N, K) length-normalised, -inf in empty slots, sorted descending
    log_prob: Tensor  # (N, K)
    tokens: Tensor  # (N, K, L) ids with EOS, PAD after

    def merge(self, score: Tensor, log_prob: Tensor, tokens: Tensor) -> None:
        """Keep the best K of the kept and the new (N, C) candidates."""
        k = self.score.shape[1]
        all_score = torch.cat([self.score, score], dim=1)  # (N, K + C)
        best, idx = all_score.topk(k, dim=1)
        self.score = best
        self.log_prob = torch.cat([self.log_prob, log_prob], dim=1).gather(1, idx)
        all_tokens = torch.cat([self.tokens, tokens], dim=1)  # (N, K + C, L)
        self.tokens = all_tokens.gather(1, idx[..., None].expand(-1, -1, all_tokens.shape[2]))

    def add_ended(
        self, top: Tensor, beam: Tensor, tok: Tensor, prefixes: Tensor, step: int, lp: Penalty
    ) -> Tensor:
        """Keep the candidates (N, 2K) that end with EOS among the K best (fairseq's rule),
        scored with the length penalty; returns where candidates end."""
        k = self.score.shape[1]
        ends = tok.eq(EOS)
        ended = ends & (torch.arange(2 * k, device=top.device) < k) & top.gt(NEG_INF)
        normed = top / lp(float(step + 1))
        tokens = _ended_candidates(prefixes, beam, tok, self.tokens.shape[2])
        self.merge(normed.masked_fill(~ended, NEG_INF), top, tokens)
        return ends

    def select(self, index: Tensor) -> None:
        kept = self.take(index)
        self.score, self.log_prob, self.tokens = kept.score, kept.log_prob, kept.tokens

    def take(self, index: Tensor) -> _Finished:
        return _Finished(self.score[index], self.log_prob[index], self.tokens[index])


def _ended_candidates(tokens: Tensor, beam: Tensor, top_tok: Tensor, steps: int) -> Tensor:
    """Token rows (N, C, L) of candidates that end now: their beam's prefix, EOS, padding.
    tokens: (N, K, t) prefixes; beam, top_tok: (N, C)."""
    n, c = beam.shape
    t = tokens.shape[2]
    prefix = tokens.gather(1, beam[..., None].expand(-1, -1, t))  # (N, C, t)
    out = torch.full((n, c, steps), PAD, dtype=torch.long, device=tokens.device)
    out[..., :t] = prefix
    out[..., t] = top_tok
    return out


def _top_candidates(scores: Tensor, lprobs: Tensor, k: int) -> tuple[Tensor, Tensor, Tensor]:
    """The 2k best extensions of each sentence's beams: scores, beam index and token, (N, 2k).
    scores: (N, W) of W live beams; lprobs: (N, W, V), overwritten with the candidates'
    summed log-probabilities. Missing candidates score -inf."""
    n, width, vocab = lprobs.shape
    total = lprobs.add_(scores[..., None]).view(n, width * vocab)
    top, flat = total.topk(min(2 * k, width * vocab), dim=1)
    if top.shape[1] < 2 * k:  # a vocabulary smaller than 2k: pad with impossible candidates
        top = F.pad(top, (0, 2 * k - top.shape[1]), value=NEG_INF)
        flat = F.pad(flat, (0, 2 * k - flat.shape[1]), value=0)
    return top, flat // vocab, flat % vocab


@dataclass
class _Beams:
    """The live part of a batched beam search: N sentences x K beams."""

    sent: Tensor  # (N,) original index of each live sentence
    scores: Tensor  # (N, W) summed log-probabilities of the live beams (W = 1 before step 1)
    tokens: Tensor  # (N, W, t) generated prefixes
    max_len: Tensor  # (N,)
    memory: Tensor  # (N, S, D): one row per sentence, shared by its beams
    src_pad: Tensor  # (N, S)
    fin: _Finished
    shortest: int = 0  # the least of max_len, read when sentences leave (a sync anyway)

    def __post_init__(self) -> None:
        self.shortest = int(self.max_len.min())

    def follow(self, state: DecoderState, rows: Tensor) -> None:
        """Reorder the self-attention caches to the chosen beams, (N*K,) rows; after the
        first step this expands them from one row per sentence to K. The memory and the
        cross-attention caches keep one row per sentence (CrossAttention groups the beams)."""
        for cache in state.self_caches:
            cache.reorder(rows)

    def keep(self, state: DecoderState, keep: Tensor, rows: Tensor) -> None:
        """Keep sentences `keep` (N',) whose beam rows in the cache are `rows` (N'*K,)."""
        state.reorder(rows, sources=keep)
        self.sent, self.scores, self.tokens = self.sent[keep], self.scores[keep], self.tokens[keep]
        self.max_len, self.memory = self.max_len[keep], self.memory[keep]
        self.src_pad = self.src_pad[keep]
        self.fin.select(keep)
        self.shortest = int(self.max_len.min())


@torch.no_grad()
def beam_search(
    model: Transformer,
    src: Tensor,
    beam_size: int = 4,
    lenpen: float = 0.6,
    max_len_a: float = 1.0,
    max_len_b: int = 50,
    nbest: int = 1,
    lengths: Tensor | None = None,
    stopping: str = "heuristic",
    length_norm: str = "length",
) -> list[list[Hypothesis]]:
    """Batched beam search (batch x beam rows in one cache), hypotheses compared by their
    summed log-probability over the length penalty `length_norm` at `lenpen`
    (length_penalty).
    A sentence stops at its maximum length, or once `beam_size` hypotheses have ended and
    its best running beam could not beat the worst of them by ending at the next step
    ("heuristic") or at the maximum length ("exact", a true bound); with "first_k", at once
    (fairseq). Returns the `nbest` best, nbest <= beam_size.
    `lengths` (B,) overrides the maximum lengths of max_len_a and max_len_b."""
    B, K, dev = src.shape[0], beam_size, src.device  # noqa: N806
    lp = penalty(lenpen, length_norm)
    src = pad_source(model, src)
    src_pad = src.eq(PAD)
    max_len = lengths if lengths is not None else max_lengths(model, src, max_len_a, max_len_b)
    steps = int(max_len.max()) + 1
    empty = torch.full((B, K), NEG_INF, device=dev)
    fin = _Finished(empty, torch.zeros_like(empty), empty.new_full((B, K, steps), PAD).long())
    # the first step runs on one row per sentence, then the cache is expanded to K beams
    beams = _Beams(
        torch.arange(B, device=dev), torch.zeros(B, 1, device=dev),
        src.new_empty((B, 1, 0)), max_len, model.encode(src, src_pad), src_pad, fin,
    )  # fmt: skip
    results: list[tuple[Tensor, _Finished]] = []
    last = torch.full((B,), BOS, dtype=torch.long, device=dev)
    state, scratch = model.new_state(steps), Scratch(B * K)
    for t in range(steps):
        last = _step(model, beams, state, scratch, last, t, K, lp, stopping, results)
        if last is None:
            break
    return _collect(results, B, nbest, lp)


def _step(
    model: Transformer, beams: _Beams, state: DecoderState, scratch: Scratch, last: Tensor,
    t: int, K: int, lp: Penalty, stopping: str, results: list,  # noqa: N803
) -> Tensor | None:  # fmt: skip
    """One step of every live sentence's beams: extend, keep the ended, drop the finished
    sentences (appended to `results`). Returns the next input tokens, None when all ended."""
    fin, dev = beams.fin, last.device
    n, width = beams.scores.shape
    lprobs = next_logprobs(model, last, beams.memory, beams.src_pad, state, scratch)
    lprobs = lprobs.view(n, width, -1)
    if t >= beams.shortest:  # some sentence is at its maximum length (known on the host)
        lprobs = force_eos(lprobs, t >= beams.max_len)
    top, beam, top_tok = _top_candidates(beams.scores, lprobs, K)
    ends = fin.add_ended(top, beam, top_tok, beams.tokens, t, lp)
    # the K best candidates that go on
    beams.scores, pick = top.masked_fill(ends, NEG_INF).topk(K, dim=1)  # (N, K)
    beam, next_tok = beam.gather(1, pick), top_tok.gather(1, pick)
    prefix = beams.tokens.gather(1, beam[..., None].expand(-1, -1, t))  # (N, K, t)
    beams.tokens = torch.cat([prefix, next_tok[..., None]], dim=2)
    rows = (torch.arange(n, device=dev)[:, None] * width + beam).view(-1)  # (N*K,)
    last = next_tok.view(-1)
    beams.follow(state, rows)
    full = fin.score[:, K - 1].gt(NEG_INF)
    if stopping != "first_k":  # exact: the bound at the maximum length; heuristic: now
        limit = beams.max_len if stopping == "exact" else torch.full_like(beams.max_len, t + 1)
        full &= fin.score[:, K - 1] >= best_possible(beams.scores[:, 0], limit, lp)
    done = full | (t >= beams.max_len) | beams.scores[:, 0].isneginf()
    if not bool(done.any()):  # the one host sync per step
        return last
    results.append((beams.sent[done], fin.take(done)))
    keep = (~done).nonzero().squeeze(1)
    if keep.numel() == 0:
        return None
    keep_rows = (keep[:, None] * K + torch.arange(K, device=dev)).view(-1)  # (N'*K,)
    beams.keep(state, keep, keep_rows)
    return last[keep_rows]


def best_possible(log_prob: Tensor, max_len: Tensor, lp: Penalty) -> Tensor:
    """The highest score a running beam with summed log-probability `log_prob` (<= 0) can
    still reach: later tokens only lower the sum, and both penalties grow with length
    (alpha >= 0), so the bound is the sum divided by the penalty at the maximum length (EOS
    included)."""
    return log_prob / lp(max_len.float() + 1.0)


def _collect(results: list, batch: int, nbest: int, lp: Penalty) -> list[list[Hypothesis]]:
    """Host-side n-best lists in the original sentence order (one sync per batch)."""
    out: list[list[Hypothesis]] = [[] for _ in range(batch)]
    for sent, fin in results:
        scores = fin.score[:, :nbest].tolist()
        log_probs, tokens = fin.log_prob[:, :nbest].tolist(), fin.tokens[:, :nbest].tolist()
        for i, s in enumerate(sent.tolist()):
            hyps = hypotheses(tokens[i], log_probs[i], lp)
            out[s] = [h for h, sc in zip(hyps, scores[i], strict=True) if sc > NEG_INF]
    return out


@SEARCH.register("beam")
def beam(
    model: Transformer, src: Tensor, cfg: DecodeConfig, generator: torch.Generator | None = None
) -> list[list[Hypothesis]]:
    """Beam search of cfg.beam_size; a beam of 1 is greedy search."""
    if cfg.beam_size == 1:
        return greedy(model, src, cfg)
    return beam_search(model, src, cfg.beam_size, cfg.lenpen, cfg.max_len_a, cfg.max_len_b,
                       cfg.nbest, stopping=cfg.stopping, length_norm=cfg.length_norm)  # fmt: skip
