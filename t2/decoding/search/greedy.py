"""Greedy search: the most probable token at every step. Its strategy, one row a sentence
extended by one token a step (TokenByToken), is sampling's too (t2.decoding.search.sample)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from t2.decoding.common import Hypothesis, Penalty, hypotheses, penalty
from t2.decoding.loop import Live
from t2.facts import Ct2, SearchFacts
from t2.model.transformer import DecoderState
from t2.registry import SEARCH
from t2.specials import EOS, PAD

if TYPE_CHECKING:  # the options (the config floor) need no strategy
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


@SEARCH.register("greedy", SearchFacts(Ct2({"beam_size": 1}), reads=()))  # ct2: a beam of 1
def greedy(cfg: DecodeConfig, generator: torch.Generator) -> TokenByToken:
    """The most probable token at every step; lenpen and length_norm only scale the
    reported score."""
    return TokenByToken(most_probable, penalty(cfg.lenpen, cfg.length_norm))
