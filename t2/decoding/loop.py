"""The one decoding loop (the shape of fairseq's SequenceGenerator, which takes a Search):
encode the source batch once, then ask the model for the next token's log-probabilities
and let a strategy choose, step after step, until every sentence has ended. The setup (the
source's padding, the output limits, the decoder cache) is written here only; a strategy
(greedy, sampling and beam, t2.decoding.search) is what differs.

Sentences that have ended leave the batch (`Live.keep` and the cache's reorder), so the work
per step shrinks as they finish. Searches run under no_grad, not inference_mode (see
t2.decoding.common)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import torch

from t2.decoding.common import (
    Hypothesis,
    Scratch,
    force_eos,
    max_lengths,
    next_logprobs,
    pad_source,
)
from t2.model.transformer import DecoderState, Transformer
from t2.specials import BOS, PAD

if TYPE_CHECKING:
    from t2.decoding.options import DecodeConfig

Tensor = torch.Tensor


@dataclass
class Live:
    """The sentences still decoding: one row each of the encoder's output."""

    sent: Tensor  # (N,) original index of each live sentence
    max_len: Tensor  # (N,) most tokens before EOS
    memory: Tensor  # (N, S, D)
    src_pad: Tensor  # (N, S)
    shortest: int = 0  # the least of max_len, read when sentences leave (a sync anyway)

    def __post_init__(self) -> None:
        self.shortest = int(self.max_len.min())

    def limit(self, lprobs: Tensor, t: int) -> Tensor:
        """`lprobs` (N, ..., V) with only EOS left to sentences at their maximum length."""
        if t < self.shortest:  # known on the host: no sentence is at its limit yet
            return lprobs
        return force_eos(lprobs, t >= self.max_len)

    def keep(self, keep: Tensor) -> None:
        self.sent, self.max_len = self.sent[keep], self.max_len[keep]
        self.memory, self.src_pad = self.memory[keep], self.src_pad[keep]
        self.shortest = int(self.max_len.min())


@runtime_checkable  # a search from outside t2 is checked to be one (t2.model.interface)
class Strategy(Protocol):
    """What differs between searches: how many copies of a sentence it decodes (sampling's
    n samples), how many rows a copy takes after the first step (beams), and how each step's
    log-probabilities become the next tokens."""

    copies: int
    width: int

    def start(self, live: Live, steps: int) -> None:
        """Prepare for `steps` steps at most of the sentences in `live`."""

    def step(self, lprobs: Tensor, t: int, live: Live, state: DecoderState) -> Tensor | None:
        """The next input token of every live row after step `t` (lprobs: (rows, V)),
        dropping ended sentences from `live` and `state`; None when all have ended."""

    def finish(self, batch: int) -> list[list[Hypothesis]]:
        """Each sentence's hypotheses, best first (`batch` rows were decoded)."""


@torch.no_grad()
def generate(
    model: Transformer,
    src: Tensor,
    cfg: DecodeConfig,
    strategy: Strategy,
    lengths: Tensor | None = None,
) -> list[list[Hypothesis]]:
    """Decode a padded source batch (B, S) on the model's device with `strategy`; `lengths`
    (B,) overrides the maximum output lengths of cfg.max_len_a and cfg.max_len_b."""
    if strategy.copies > 1:  # the copies of a sentence are adjacent rows
        src = src.repeat_interleave(strategy.copies, dim=0)
        lengths = None if lengths is None else lengths.repeat_interleave(strategy.copies)
    batch, device = src.shape[0], src.device
    src = pad_source(model, src)
    src_pad = src.eq(PAD)
    memory = model.encode(src, src_pad)
    max_len = (
        lengths if lengths is not None else max_lengths(model, src, cfg.max_len_a, cfg.max_len_b)
    )
    steps = int(max_len.max()) + 1
    live = Live(torch.arange(batch, device=device), max_len, memory, src_pad)
    state, scratch = model.new_state(steps), Scratch(batch * strategy.width)
    last: Tensor | None = torch.full((batch,), BOS, dtype=torch.long, device=device)
    strategy.start(live, steps)
    for t in range(steps):
        lprobs = next_logprobs(model, last, live.memory, live.src_pad, state, scratch)
        last = strategy.step(lprobs, t, live, state)
        if last is None:
            break
    return strategy.finish(batch)
