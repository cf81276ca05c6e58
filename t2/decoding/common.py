"""What every search strategy shares: hypotheses and their scores, the output-length limit,
the next token's log-probabilities and the source batch's padding.

Scores are log-probabilities divided by a length penalty lp(n), where n counts the
generated tokens including EOS: "gnmt", ((5 + n) / 6)^alpha, of Wu et al. 2016
(arXiv:1609.08144, eq. 14), or "length", n^alpha, the normalisation of fairseq (--lenpen) and
transformers (length_penalty). The maximum output length is max_len_a * source length +
max_len_b tokens before EOS (the source length counts its non-padding tokens, EOS included),
written once here (`output_limits`) for t2's searches and CTranslate2's engine alike.
Searches run under no_grad, not inference_mode: a positional table grown while decoding a
validation set must remain usable when training resumes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F

from t2.model import attention
from t2.model.transformer import DecoderState, Transformer
from t2.specials import BOS, EOS, PAD

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


def length_penalty(
    length: Tensor | float, lenpen: float, length_norm: str = "length"
) -> Tensor | float:
    """The divisor of a hypothesis' summed log-probability at `length` tokens (EOS included):
    "gnmt", ((5 + n) / 6)^alpha (Wu et al. 2016, eq. 14); "length", n^alpha (fairseq's lenpen,
    transformers' length_penalty). Both grow with n for alpha > 0; "length" grows faster, so
    it favours longer hypotheses at the same alpha."""
    if length_norm == "length":
        return length**lenpen
    return ((5.0 + length) / 6.0) ** lenpen


Penalty = Callable[[Any], Any]  # length (float or Tensor) -> divisor, alpha and norm bound


def penalty(lenpen: float, length_norm: str = "length") -> Penalty:
    return partial(length_penalty, lenpen=lenpen, length_norm=length_norm)


def output_limits(
    src_lengths: Tensor, max_len_a: float, max_len_b: int, max_length: int | None
) -> Tensor:
    """The most tokens before EOS of each output, (B,): max_len_a * source length +
    max_len_b, floored, at least 0; a positional table of `max_length` rows (None: no limit)
    stops it at max_length - 1 (BOS takes one row)."""
    out = (max_len_a * src_lengths + max_len_b).floor().long().clamp(min=0)
    return out if max_length is None else out.clamp(max=max_length - 1)


def max_lengths(model: Transformer, src: Tensor, max_len_a: float, max_len_b: int) -> Tensor:
    """Per-sentence maximum number of tokens before EOS, (B,), of a padded source batch."""
    return output_limits(src.ne(PAD).sum(dim=1), max_len_a, max_len_b, model.max_length)


class Scratch:
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


def next_logprobs(
    model: Transformer,
    last: Tensor,
    memory: Tensor,
    src_pad: Tensor,
    state: DecoderState,
    scratch: Scratch,
) -> Tensor:
    """Log-probabilities (N, V) of the next token in fp32, written into `scratch`; PAD and
    BOS are never generated."""
    logits = model.decode(last[:, None], memory, src_pad, state)[:, -1]  # (N, V)
    lprobs = torch.log_softmax(logits, dim=-1, dtype=torch.float32, out=scratch.take(logits))
    lprobs[:, (PAD, BOS)] = NEG_INF
    return lprobs


def force_eos(lprobs: Tensor, at_max: Tensor) -> Tensor:
    """Rows of `lprobs` (..., V) where `at_max` (a prefix of its shape) holds may only
    produce EOS; its log-probability is floored at EOS_FLOOR so that a model that never
    ends a sentence still yields a finite-scored hypothesis."""
    at_max = at_max.view(*at_max.shape, *([1] * (lprobs.dim() - at_max.dim())))  # (..., 1)
    is_eos = torch.arange(lprobs.shape[-1], device=lprobs.device).eq(EOS)
    only_eos = torch.where(is_eos, lprobs.clamp(min=EOS_FLOOR), NEG_INF)
    return torch.where(at_max, only_eos, lprobs)


def hypotheses(tokens: list[list[int]], log_probs: list[float], lp: Penalty) -> list:
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
    table = model.positional.max_length  # None: the scheme's tables grow
    if table is not None:
        length = min(length, table)
    return F.pad(src, (0, length - src.shape[1]), value=PAD) if length > src.shape[1] else src
