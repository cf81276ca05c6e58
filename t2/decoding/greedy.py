"""Strategies that extend each sentence by one token a step (one row a sentence in the one
loop, t2.decoding.loop): greedy (the most probable token) and sampling (a token drawn from
the model's distribution through the logits processors, for back-translation: Edunov et
al. 2018, arXiv:1808.09381, found sampled sources train better than beam ones)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from t2.decoding.common import Hypothesis, Penalty, hypotheses, penalty
from t2.decoding.loop import Live
from t2.decoding.processors import Processor, process, processors
from t2.model.transformer import DecoderState
from t2.registry import SEARCH
from t2.specials import EOS, PAD

if TYPE_CHECKING:  # the options import this module to register its strategies
    from t2.decoding.options import DecodeConfig

Tensor = torch.Tensor
Choose = Callable[[Tensor], tuple[Tensor, Tensor]]  # (N, V) log-probs -> (N,) log-prob, token


class TokenByToken:
    """One row a sentence (`copies` rows for as many samples); `choose` picks each next
    token; a row ends at EOS."""

    width = 1

    def __init__(self, choose: Choose, lp: Penalty, copies: int = 1) -> None:
        self.choose, self.lp, self.copies = choose, lp, copies

    def start(self, live: Live, steps: int) -> None:
        batch, device = live.sent.shape[0], live.sent.device
        self.out = torch.full((batch, steps), PAD, dtype=torch.long, device=device)
        self.log_prob = torch.zeros(batch, device=device)

    def step(self, lprobs: Tensor, t: int, live: Live, state: DecoderState) -> Tensor | None:
        best, last = self.choose(live.limit(lprobs, t))  # (N,)
        self.out[live.sent, t] = last
        self.log_prob[live.sent] += best
        ended = last.eq(EOS)
        if bool(ended.any()):  # the one host sync per step: drop finished sentences
            keep = (~ended).nonzero().squeeze(1)
            if keep.numel() == 0:
                return None
            state.reorder(keep)
            live.keep(keep)
            last = last[keep]
        return last

    def finish(self, batch: int) -> list[list[Hypothesis]]:
        flat = hypotheses(self.out.tolist(), self.log_prob.tolist(), self.lp)
        n = self.copies  # the copies of a sentence are adjacent rows
        return [sorted(flat[i : i + n], key=lambda h: -h.score) for i in range(0, len(flat), n)]


def most_probable(lprobs: Tensor) -> tuple[Tensor, Tensor]:
    return lprobs.max(dim=-1)


def sampler(chain: list[Processor], generator: torch.Generator | None) -> Choose:
    """Draw each next token from softmax of the processed log-probabilities; the
    log-probability kept is the model's own."""

    def choose(lprobs: Tensor) -> tuple[Tensor, Tensor]:
        logits = process(chain, lprobs)
        token = torch.multinomial(logits.softmax(dim=-1), 1, generator=generator).squeeze(1)
        return lprobs.gather(1, token[:, None]).squeeze(1), token

    return choose


@SEARCH.register("greedy")
def greedy(cfg: DecodeConfig, generator: torch.Generator) -> TokenByToken:
    """The most probable token at every step; lenpen and length_norm only scale the
    reported score."""
    return TokenByToken(most_probable, penalty(cfg.lenpen, cfg.length_norm))


@SEARCH.register("sample")
def sample(cfg: DecodeConfig, generator: torch.Generator) -> TokenByToken:
    """cfg.nbest samples of each sentence, best score first; reproducible for a given
    `generator` state."""
    choose = sampler(processors(cfg), generator)
    return TokenByToken(choose, penalty(cfg.lenpen, cfg.length_norm), cfg.nbest)
