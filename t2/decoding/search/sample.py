"""Sampling: each next token drawn from the model's distribution through the logits
processors, for back-translation (Edunov et al. 2018, arXiv:1808.09381, found sampled
sources train better than beam ones)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from t2.decoding.common import penalty
from t2.decoding.processors import Processor, process, processors
from t2.decoding.search.greedy import Choose, TokenByToken
from t2.facts import Ct2, SearchFacts
from t2.registry import SEARCH

if TYPE_CHECKING:  # the options (the config floor) need no strategy
    from t2.decoding.options import DecodeConfig

Tensor = torch.Tensor
ON_T2 = (
    "--search sample runs on t2's own engine: translate the run (or its hf export), not its "
    "CTranslate2 export"
)


def sampler(chain: list[Processor], generator: torch.Generator | None) -> Choose:
    """Draw each next token from softmax of the processed log-probabilities; the
    log-probability kept is the model's own."""

    def choose(lprobs: Tensor) -> tuple[Tensor, Tensor]:
        logits = process(chain, lprobs)
        token = torch.multinomial(logits.softmax(dim=-1), 1, generator=generator).squeeze(1)
        return lprobs.gather(1, token[:, None]).squeeze(1), token

    return choose


@SEARCH.register(
    "sample", SearchFacts(Ct2(unexpressed=ON_T2), reads=("temperature", "top_k", "top_p", "seed"))
)
def sample(cfg: DecodeConfig, generator: torch.Generator) -> TokenByToken:
    """cfg.nbest samples of each sentence, best score first; reproducible for a given
    `generator` state."""
    choose = sampler(processors(cfg), generator)
    return TokenByToken(choose, penalty(cfg.lenpen, cfg.length_norm), cfg.nbest)
