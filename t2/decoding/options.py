"""The decode section of the config (decode.*): the one definition of every decoding option.

Its fields are read by the searches, evaluation, translation, the model card and the
engines, and generate the command-line flags of every verb that decodes (t2.section's
add_section_arguments: --beam-size, --lenpen, --search, --temperature, ...), so an option is
named, typed, checked and explained here only (the pattern of transformers'
GenerationConfig). CTranslate2's engine maps a few onto its own names (t2.serve.ct2_engine).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from t2.errors import ConfigError
from t2.registry import SEARCH
from t2.section import Section, choice, component, option

ANY = ("*",)  # shapes: every strategy's output depends on the key


@dataclass(frozen=True)
class DecodeConfig(Section):
    """Search settings for validation, evaluation and translation."""

    SECTION = "decode"

    # shapes=ANY: every strategy's output depends on the key; a strategy's own keys are its
    # facts' (t2.facts.SearchFacts.reads: beam_size and stopping for beam, ...); batch_size
    # and nbest change how many sentences at once and how many hypotheses kept, not what
    # is found
    # greedy has one name: search beam with beam_size 1 is recorded as search greedy
    search: str = component("beam", SEARCH, help="greedy, beam (a beam of 1 is greedy) or sample")
    beam_size: int = option(4, "beams per sentence (1: greedy)", "--beam")
    lenpen: float = option(0.6, "length penalty alpha (the paper's 0.6)", shapes=ANY)
    # how a hypothesis' summed log-probability is normalised by its length n (EOS included):
    # length: / n^lenpen (fairseq's --lenpen, transformers' length_penalty); gnmt:
    # / ((5 + n) / 6)^lenpen (Wu et al. 2016, which the paper cites), a weaker reward for
    # length. On Multi30k at alpha 0.6, length gave 33.95 BLEU and gnmt 33.59
    # (docs/results/multi30k-peer.md)
    length_norm: str = choice(
        "length", "gnmt", help="divide by n^alpha or ((5+n)/6)^alpha", shapes=ANY
    )
    max_len_a: float = option(1.0, "maximum output length = a * source length + b", shapes=ANY)
    max_len_b: int = option(50, "maximum output length = a * source length + b", shapes=ANY)
    batch_size: int = option(64, "sentences per decoding batch")
    nbest: int = option(1, "hypotheses per sentence (beam: at most beam_size)")
    # when a sentence's beam search ends, once beam_size hypotheses have ended and ...
    # heuristic: its best running beam, ended at the next step, would not beat the worst of
    #   them (transformers' early_stopping=False); exact: nor at the maximum length, a true
    #   bound (early_stopping="never"; slower); first_k: at once (fairseq's rule)
    stopping: str = choice(
        "heuristic", "exact", "first_k", help="when a sentence's beam search ends"
    )
    temperature: float = option(1.0, "sample: divide log-probabilities by this")
    top_k: int = option(0, "sample: from the k most probable tokens only (0: all)")
    top_p: float = option(1.0, "sample: from the smallest set of probability >= p (nucleus)")
    seed: int = option(0, "sample: seed of the random draws (the same seed, the same output)")

    def __post_init__(self) -> None:
        super().__post_init__()
        self._at_least(1, "beam_size", "batch_size", "nbest")
        self._at_least(0, "lenpen", "max_len_a", "max_len_b", "top_k", "seed")
        if self.search == "beam" and self.nbest > self.beam_size:
            raise ConfigError(
                f"decode.nbest={self.nbest} is more than decode.beam_size={self.beam_size}; "
                f"raise the beam size (--beam-size) or lower nbest"
            )
        if self.search == "beam" and self.beam_size == 1:
            object.__setattr__(self, "search", "greedy")  # one spelling of greedy search
        if self.search == "greedy" and self.nbest > 1:
            raise ConfigError(
                f"decode.nbest={self.nbest} with greedy search, which finds one hypothesis; "
                f"use --search beam or --search sample for n-best lists"
            )
        if self.temperature <= 0 or not 0 < self.top_p <= 1:
            raise ConfigError(
                f"decode.temperature must be > 0 and decode.top_p in (0, 1], got "
                f"{self.temperature} and {self.top_p}"
            )

    def updated(self, **changes: Any) -> DecodeConfig:
        """These settings with `changes` (decode.* keys). A beam size given without a search
        asks for beam search: a greedy section would otherwise ignore it."""
        if "beam_size" in changes and "search" not in changes and self.search == "greedy":
            changes = {**changes, "search": "beam"}
        return replace(self, **changes)

    def recorded(self) -> dict[str, Any]:
        """Every setting that shapes the output, search first: what results, scores and the
        model card record of a decode."""
        return output_settings(asdict(self))


def output_settings(values: dict) -> dict:
    """Of a decode section's values (a dict, as records hold them), the ones its search
    strategy's output depends on: search, the strategy's own keys (its facts' `reads`,
    which imports the strategy), then every strategy's (shapes=ANY), in the section's
    order. A record without `search` was written before it existed: beam search."""
    search = values.get("search", "beam")
    reads = SEARCH.facts(search).reads
    shapes = {f.name: f.metadata.get("shapes", ()) for f in fields(DecodeConfig)}
    if not set(reads) <= set(shapes):
        unknown = ", ".join(sorted(set(reads) - set(shapes)))
        raise ConfigError(
            f"search strategy {search!r} reads {unknown}: not decode keys; fix its facts"
        )
    shaping = [k for k in shapes if k in reads] + [k for k, on in shapes.items() if on == ANY]
    return {"search": search, **{k: values[k] for k in shaping if k in values}}
