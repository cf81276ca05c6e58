"""Cached greedy and batched beam search over the decoder's key/value cache.

The whole batch (x beam) is decoded together with one DecoderState; a sentence that has
ended leaves the batch through `state.reorder`, so the work per step shrinks as sentences
finish. Scores are log-probabilities divided by a length penalty lp(n), where n counts the
generated tokens including EOS: "gnmt", ((5 + n) / 6)^alpha, of Wu et al. 2016
(arXiv:1609.08144, eq. 14), or "length", n^alpha, the normalisation of fairseq (--lenpen) and
transformers (length_penalty). The maximum output length is max_len_a * source length +
max_len_b tokens before EOS (the source length counts its non-padding tokens, EOS included).
Searches run under no_grad, not inference_mode: a positional table grown while decoding a validation
set must remain usable when training resumes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F

from t2.config import DecodeConfig
from t2.data.tokenizer import BOS, EOS, PAD
from t2.model import attention
from t2.model.positional import LearnedPositional
from t2.model.transformer import DecoderState, Transformer

Tensor = torch.Tensor
NEG_INF = float("-inf")
EOS_FLOOR = -1e4  # log-probability of a forced EOS that the model gave none


@dataclass
class Hypothesis:
    """One output: generated ids (no BOS, no EOS), summed log-probability (EOS included)
    and the model score, log_prob / lp(len(tokens) + 1)."""

    tokens: list[int]
    log_prob: float
    score: float


def length_penalty(length: Tensor | float, alpha: float, norm: str = "length") -> Tensor | float:
    """The divisor of a hypothesis' summed log-probability at `length` tokens (EOS included):
    "gnmt", ((5 + n) / 6)^alpha (Wu et al. 2016, eq. 14); "length", n^alpha (fairseq's lenpen,
    transformers' length_penalty). Both grow with n for alpha > 0; "length" grows faster, so
    it favours longer hypotheses at the same alpha."""
    if norm == "length":
        return length**alpha
    return ((5.0 + length) / 6.0) ** alpha


Penalty = Callable[[Any], Any]  # length (float or Tensor) -> divisor, alpha and norm bound


def penalty(alpha: float, norm: str = "length") -> Penalty:
    return partial(length_penalty, alpha=alpha, norm=norm)


def max_lengths(model: Transformer, src: Tensor, max_len_a: float, max_len_b: int) -> Tensor:
    """Per-sentence maximum number of tokens before EOS, (B,). A positional scheme with a
    fixed table (learned) stops the output at its length - 1 tokens (BOS takes one)."""
    src_len = src.ne(PAD).sum(dim=1)
    out = (max_len_a * src_len + max_len_b).floor().long().clamp(min=0)
    if model.max_length is not None:
        out = out.clamp(max=model.max_length - 1)
    return out


class _Scratch:
    """One float32 (rows, V) buffer for a whole search's log-probabilities: a fresh one every
    step costs more in page faults than the log-softmax itself (4 ms against 0.3 for 128 x
    8,000 on a 2-core CPU)."""

    def __init__(self, rows: int) -> None:
        self.rows, self.buffer = rows, None

    def take(self, logits: Tensor) -> Tensor:
        n, vocab = logits.shape
        if self.buffer is None or self.buffer.shape[1] != vocab or n > self.rows:
            self.rows = max(self.rows, n)
            self.buffer = logits.new_empty((self.rows, vocab), dtype=torch.float32)
        return self.buffer[:n]


def _next_logprobs(
    model: Transformer, last: Tensor, memory: Tensor, src_pad: Tensor, state: DecoderState,
    scratch: _Scratch,
) -> Tensor:  # fmt: skip
    """Log-probabilities (N, V) of the next token in fp32, written into `scratch`; PAD and
    BOS are never generated."""
    logits = model.decode(last[:, None], memory, src_pad, state)[:, -1]  # (N, V)
    lprobs = torch.log_softmax(logits, dim=-1, dtype=torch.float32, out=scratch.take(logits))
    lprobs[:, (PAD, BOS)] = NEG_INF
    return lprobs


def _force_eos(lprobs: Tensor, at_max: Tensor) -> Tensor:
    """Rows of `lprobs` (..., V) where `at_max` (a prefix of its shape) holds may only
    produce EOS; its log-probability is floored at EOS_FLOOR so that a model that never
    ends a sentence still yields a finite-scored hypothesis."""
    at_max = at_max.view(*at_max.shape, *([1] * (lprobs.dim() - at_max.dim())))  # (..., 1)
    is_eos = torch.arange(lprobs.shape[-1], device=lprobs.device).eq(EOS)
    only_eos = torch.where(is_eos, lprobs.clamp(min=EOS_FLOOR), NEG_INF)
    return torch.where(at_max, only_eos, lprobs)


def _hypotheses(tokens: list[list[int]], log_probs: list[float], lp: Penalty) -> list:
    out = []
    for ids, log_prob in zip(tokens, log_probs, strict=True):
        body = ids[: ids.index(EOS)] if EOS in ids else ids
        out.append(Hypothesis(body, log_prob, log_prob / lp(len(body) + 1)))
    return out


def pad_source(model: Transformer, src: Tensor) -> Tensor:
    """A 16-bit model's source batch on a CPU, padded to a length that is a multiple of
    attention.SHAPE_MULTIPLE (the new positions are padding, masked everywhere), so that the
    encoder and cross-attention meet that many times fewer kernel shapes. Never past a
    learned position table; any other batch as it is."""
    weight = getattr(getattr(model, "src_embed", None), "weight", None)  # duck-typed models
    if weight is None or not attention.per_shape_kernels(weight):
        return src
    multiple = attention.SHAPE_MULTIPLE
    length = -(-src.shape[1] // multiple) * multiple
    if isinstance(model.positional, LearnedPositional):
        length = min(length, model.positional.weight.shape[0])
    return F.pad(src, (0, length - src.shape[1]), value=PAD) if length > src.shape[1] else src


@torch.no_grad()
def greedy_search(
    model: Transformer,
    src: Tensor,
    max_len_a: float = 1.0,
    max_len_b: int = 50,
    alpha: float = 0.6,
    lengths: Tensor | None = None,
    norm: str = "length",
) -> list[list[Hypothesis]]:
    """The most probable next token at every step; src (B, S) padded ids on the model's device.
    `alpha` and `norm` only scale the reported score; `lengths` (B,) overrides the maximum
    lengths."""
    B = src.shape[0]  # noqa: N806
    src = pad_source(model, src)
    src_pad = src.eq(PAD)
    memory = model.encode(src, src_pad)
    max_len = lengths if lengths is not None else max_lengths(model, src, max_len_a, max_len_b)
    steps = int(max_len.max()) + 1
    out = torch.full((B, steps), PAD, dtype=torch.long, device=src.device)
    log_prob = torch.zeros(B, device=src.device)
    rows = torch.arange(B, device=src.device)  # original sentence of each active row
    last = torch.full((B,), BOS, dtype=torch.long, device=src.device)
    state, scratch = model.new_state(steps), _Scratch(B)
    shortest = int(max_len.min())  # rows at their maximum length from this step on
    for t in range(steps):
        lprobs = _next_logprobs(model, last, memory, src_pad, state, scratch)
        if t >= shortest:
            lprobs = _force_eos(lprobs, t >= max_len)
        best, last = lprobs.max(dim=-1)  # (N,)
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
    hyps = _hypotheses(out.tolist(), log_prob.tolist(), penalty(alpha, norm))
    return [[h] for h in hyps]


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
    alpha: float = 0.6,
    max_len_a: float = 1.0,
    max_len_b: int = 50,
    nbest: int = 1,
    lengths: Tensor | None = None,
    stopping: str = "heuristic",
    norm: str = "length",
) -> list[list[Hypothesis]]:
    """Batched beam search (batch x beam rows in one cache), hypotheses compared by their
    summed log-probability over the length penalty `norm` at `alpha` (length_penalty).
    A sentence stops at its maximum length, or once `beam_size` hypotheses have ended and
    its best running beam could not beat the worst of them by ending at the next step
    ("heuristic") or at the maximum length ("exact", a true bound); with "first_k", at once
    (fairseq). Returns the `nbest` best, nbest <= beam_size.
    `lengths` (B,) overrides the maximum lengths of max_len_a and max_len_b."""
    B, K, dev = src.shape[0], beam_size, src.device  # noqa: N806
    lp = penalty(alpha, norm)
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
    state, scratch = model.new_state(steps), _Scratch(B * K)
    for t in range(steps):
        n, width = beams.scores.shape
        lprobs = _next_logprobs(model, last, beams.memory, beams.src_pad, state, scratch)
        lprobs = lprobs.view(n, width, -1)
        if t >= beams.shortest:  # some sentence is at its maximum length (known on the host)
            lprobs = _force_eos(lprobs, t >= beams.max_len)
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
            continue
        results.append((beams.sent[done], fin.take(done)))
        keep = (~done).nonzero().squeeze(1)
        if keep.numel() == 0:
            break
        keep_rows = (keep[:, None] * K + torch.arange(K, device=dev)).view(-1)  # (N'*K,)
        beams.keep(state, keep, keep_rows)
        last = last[keep_rows]
    return _collect(results, B, nbest, lp)


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
            hyps = _hypotheses(tokens[i], log_probs[i], lp)
            out[s] = [h for h, sc in zip(hyps, scores[i], strict=True) if sc > NEG_INF]
    return out


def search(model: Transformer, src: Tensor, cfg: DecodeConfig) -> list[list[Hypothesis]]:
    """Greedy when cfg.beam_size is 1, beam search otherwise."""
    if cfg.beam_size == 1:
        return greedy_search(model, src, cfg.max_len_a, cfg.max_len_b, cfg.lenpen,
                             norm=cfg.length_norm)  # fmt: skip
    return beam_search(model, src, cfg.beam_size, cfg.lenpen, cfg.max_len_a, cfg.max_len_b,
                       cfg.nbest, stopping=cfg.stopping, norm=cfg.length_norm)  # fmt: skip
