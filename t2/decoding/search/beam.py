"""Batched beam search as a strategy of the one decoding loop (t2.decoding.loop): batch x
beam rows in one key/value cache, hypotheses compared by their summed log-probability over
the length penalty (t2.decoding.common).

The first step runs on one row per sentence, then the cache is expanded to K beams; a
sentence leaves the batch when it is done, so the work per step shrinks as sentences end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from t2.decoding.common import NEG_INF, Hypothesis, Penalty, hypotheses, penalty
from t2.decoding.loop import Live
from t2.facts import Ct2, SearchFacts
from t2.model.transformer import DecoderState
from t2.registry import SEARCH
from t2.specials import EOS, PAD

if TYPE_CHECKING:  # the options (the config floor) need no strategy
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


class BeamSearch:
    """K beams a sentence, hypotheses compared by their summed log-probability over the
    length penalty `lp`. A sentence stops at its maximum length, or once K hypotheses have
    ended and its best running beam could not beat the worst of them by ending at the next
    step ("heuristic") or at the maximum length ("exact", a true bound); with "first_k", at
    once (fairseq). `nbest` <= K of each come back."""

    copies = 1

    def __init__(self, beam_size: int, lp: Penalty, stopping: str, nbest: int) -> None:
        self.width, self.lp, self.stopping, self.nbest = beam_size, lp, stopping, nbest

    def start(self, live: Live, steps: int) -> None:
        batch, K, dev = live.sent.shape[0], self.width, live.sent.device  # noqa: N806
        empty = torch.full((batch, K), NEG_INF, device=dev)
        tokens = empty.new_full((batch, K, steps), PAD).long()
        self.fin = _Finished(empty, torch.zeros_like(empty), tokens)
        # the first step runs on one row per sentence, then the cache is expanded to K beams
        self.scores = torch.zeros(batch, 1, device=dev)  # (N, W) of the live beams
        self.tokens = torch.zeros((batch, 1, 0), dtype=torch.long, device=dev)  # (N, W, t)
        self.results: list[tuple[Tensor, _Finished]] = []

    def step(self, lprobs: Tensor, t: int, live: Live, state: DecoderState) -> Tensor | None:
        """Extend every live sentence's beams, keep the ended, drop the finished sentences."""
        fin, dev, K = self.fin, lprobs.device, self.width  # noqa: N806
        n, width = self.scores.shape
        lprobs = live.limit(lprobs.view(n, width, -1), t)
        top, beam, top_tok = _top_candidates(self.scores, lprobs, K)
        ends = fin.add_ended(top, beam, top_tok, self.tokens, t, self.lp)
        # the K best candidates that go on
        self.scores, pick = top.masked_fill(ends, NEG_INF).topk(K, dim=1)  # (N, K)
        beam, next_tok = beam.gather(1, pick), top_tok.gather(1, pick)
        prefix = self.tokens.gather(1, beam[..., None].expand(-1, -1, t))  # (N, K, t)
        self.tokens = torch.cat([prefix, next_tok[..., None]], dim=2)
        # the self-attention caches follow the chosen beams, (N*K,) rows; after the first
        # step this expands them from one row per sentence to K. The memory and the
        # cross-attention caches keep one row per sentence (CrossAttention groups the beams)
        for cache in state.self_caches:
            cache.reorder((torch.arange(n, device=dev)[:, None] * width + beam).view(-1))
        done = self._done(t, live.max_len)
        last = next_tok.view(-1)
        if not bool(done.any()):  # the one host sync per step
            return last
        self.results.append((live.sent[done], fin.take(done)))
        keep = (~done).nonzero().squeeze(1)
        if keep.numel() == 0:
            return None
        rows = (keep[:, None] * K + torch.arange(K, device=dev)).view(-1)  # (N'*K,)
        state.reorder(rows, sources=keep)
        live.keep(keep)
        self.scores, self.tokens = self.scores[keep], self.tokens[keep]
        fin.select(keep)
        return last[rows]

    def _done(self, t: int, max_len: Tensor) -> Tensor:
        """Which sentences are finished after step t (stopping rule, length, no live beam)."""
        worst = self.fin.score[:, self.width - 1]
        full = worst.gt(NEG_INF)
        if self.stopping != "first_k":  # exact: the bound at the maximum length; heuristic: now
            limit = max_len if self.stopping == "exact" else torch.full_like(max_len, t + 1)
            full &= worst >= best_possible(self.scores[:, 0], limit, self.lp)
        return full | (t >= max_len) | self.scores[:, 0].isneginf()

    def finish(self, batch: int) -> list[list[Hypothesis]]:
        return _collect(self.results, batch, self.nbest, self.lp)


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


@SEARCH.register(  # CTranslate2: its own beam of decode.beam_size
    "beam", SearchFacts(Ct2(), reads=("beam_size", "stopping"))
)
def beam(cfg: DecodeConfig, generator: torch.Generator) -> BeamSearch:
    """Beam search of cfg.beam_size (a beam of 1 is recorded as greedy, t2.decoding.options)."""
    lp = penalty(cfg.lenpen, cfg.length_norm)
    return BeamSearch(cfg.beam_size, lp, cfg.stopping, cfg.nbest)
