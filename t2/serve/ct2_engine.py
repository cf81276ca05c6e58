"""Translate with a CTranslate2 export as t2's own search does: the same source ids, the same
length-sorted batches, the same maximum length and the same scores.

Each search strategy says how CTranslate2 runs it (t2.facts.SearchFacts), or why it cannot;
greedy search gives t2's token ids: a batch is decoded in one call up to its longest maximum
length (max_len_a * source length + max_len_b tokens before EOS), and a sentence whose output
reached its own shorter maximum is decoded again at that maximum, so each output ends where
t2 forces EOS. PAD and BOS are never generated,
as in t2 (CTranslate2 removes them before normalising, t2 after: scores differ by the
probability the model gives those two tokens).
Beam search is CTranslate2's: a sentence ends once beam_size hypotheses have ended (t2's
decode.stopping=first_k, fairseq's rule) and hypotheses are ranked by log-probability / n^alpha
with n counting EOS (t2's decode.length_norm=length). Under length_norm=gnmt, every hypothesis
CTranslate2 finished is re-scored with ((5 + n) / 6)^alpha and the best are kept.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import torch

from t2.decoding.common import Hypothesis, length_penalty, output_limits
from t2.decoding.options import DecodeConfig
from t2.errors import ExportError
from t2.progress import Progress
from t2.registry import SEARCH
from t2.serve.engine import Engine, length_batches
from t2.specials import EOS, SPECIALS


def _device(device: str) -> tuple[str, int]:
    """'cpu', 'cuda' or 'cuda:N' -> CTranslate2's device and device index."""
    name, _, index = str(device).partition(":")
    return name, int(index or 0)


def translator(folder: str, device: str, precision: str | None, workers: int) -> Any:
    """A ctranslate2.Translator over an export folder: `workers` batches decoded at once
    (its inter_threads), each with its share of torch's threads (at least one)."""
    import ctranslate2  # optional dependency: the serve extra

    name, index = _device(device)
    return ctranslate2.Translator(
        folder,
        device=name,
        device_index=index,
        inter_threads=workers,
        intra_threads=max(1, torch.get_num_threads() // workers),
        compute_type=precision or "default",  # default: the export's --quantization
    )


class Ct2Engine(Engine):
    """CTranslate2's searches over a translator of an export (t2.formats.export.ct2)."""

    def __init__(
        self,
        translator: Any,
        tokenizer: Any,
        src_bos: bool,
        max_positions: int | None,
        workers: int = 1,
    ) -> None:
        self.translator, self.tokenizer, self.src_bos = translator, tokenizer, src_bos
        self._max_positions, self.workers = max_positions, workers
        self._noted = False

    @property
    def max_positions(self) -> int | None:
        return self._max_positions

    def decode_ids(
        self, src_ids: Sequence[list[int]], decode: DecodeConfig, progress: Progress | None = None
    ) -> list[list[Hypothesis]]:
        """Every batch is queued at once; the translator's workers take them in turn. The
        search runs as its facts say CTranslate2 runs it (greedy: a beam of 1), or not."""
        how = SEARCH.facts(decode.search).ct2
        if how.unexpressed:
            raise ExportError(how.unexpressed)
        decode = replace(decode, **how.options)
        self._note(decode)
        hyps: list[list[Hypothesis]] = [[] for _ in src_ids]
        batches = list(length_batches([len(r) for r in src_ids], decode.batch_size))
        pending = [self.submit([src_ids[i] for i in batch], decode) for batch in batches]
        for batch, collect in zip(batches, pending, strict=True):
            for i, h in zip(batch, collect(), strict=True):
                hyps[i] = h
            if progress is not None:
                progress.update(len(batch))
        return hyps

    def limits(self, src_ids: Sequence[list[int]], decode: DecodeConfig) -> list[int]:
        """t2's maximum number of tokens before EOS of each source (output_limits)."""
        lengths = torch.tensor([len(r) for r in src_ids])
        limits = output_limits(lengths, decode.max_len_a, decode.max_len_b, self.max_positions)
        return limits.tolist()

    def search(self, src_ids: Sequence[list[int]], decode: DecodeConfig) -> list[list[Hypothesis]]:
        """n-best hypotheses of one batch of source ids (t2's: [BOS] tokens EOS)."""
        return self.submit(src_ids, decode)()

    def submit(
        self, src_ids: Sequence[list[int]], decode: DecodeConfig
    ) -> Callable[[], list[list[Hypothesis]]]:
        """Queue one batch on the translator's workers; the function returned waits for its
        n-best hypotheses. CTranslate2's max_decoding_length is per call, so the batch goes
        in one call up to its longest limit, and the sentences whose output reached their
        own (shorter) limit, which t2 would have ended there, go again with that limit."""
        limits = self.limits(src_ids, decode)
        head = 1 if self.src_bos else 0  # CTranslate2 adds BOS and EOS itself
        source = [self.tokenizer.convert_ids_to_tokens(r[head:-1]) for r in src_ids]
        longest = max(limits)
        jobs = self._translate(source, longest, decode)

        def collect() -> list[list[Hypothesis]]:
            results = [job.result() for job in jobs]
            # without a length penalty CTranslate2 ends a sentence once its best beam has
            # ended, so beams that t2 would end at a shorter limit leave no trace: go again
            blind = decode.beam_size > 1 and decode.lenpen == 0
            again = [
                i
                for i, r in enumerate(results)
                if limits[i] < longest and (blind or self._reached(r.hypotheses, limits[i]))
            ]
            for limit in sorted({limits[i] for i in again}):
                rows = [i for i in again if limits[i] == limit]
                redo = self._translate([source[i] for i in rows], limit, decode)
                for i, job in zip(rows, redo, strict=True):
                    results[i] = job.result()
            return [
                self._hypotheses(r.hypotheses, r.scores, limits[i], decode)
                for i, r in enumerate(results)
            ]

        return collect

    def _reached(self, hypotheses: list[list[str]], limit: int) -> bool:
        """Whether a hypothesis has `limit` tokens or more before EOS."""
        return any(self._length(h) >= limit for h in hypotheses)

    def _length(self, tokens: list[str]) -> int:
        """Tokens before EOS of a CTranslate2 hypothesis (it returns the end token)."""
        return len(tokens) - 1 if tokens and tokens[-1] == self.tokenizer.eos_token else len(tokens)

    def _translate(self, source: list[list[str]], limit: int, decode: DecodeConfig) -> list:
        """CTranslate2's asynchronous results of one call (one per sentence)."""
        rerank = decode.beam_size > 1 and decode.lenpen != 0
        return self.translator.translate_batch(
            source,
            beam_size=decode.beam_size,
            length_penalty=decode.lenpen,
            num_hypotheses=decode.beam_size if rerank else decode.nbest,
            max_decoding_length=limit + 1,
            min_decoding_length=0,
            max_input_length=0,
            return_scores=True,
            return_end_token=True,
            asynchronous=True,
            suppress_sequences=[[SPECIALS["pad"]], [SPECIALS["bos"]]],
        )

    def _hypotheses(
        self, tokens: list[list[str]], scores: list[float], limit: int, decode: DecodeConfig
    ) -> list[Hypothesis]:
        """t2's Hypothesis: ids before EOS (cut at the limit) and log_prob / lp(n) under
        decode.length_norm, n counting EOS; CTranslate2 reports log_prob / n^alpha."""
        out = []
        for toks, score in zip(tokens, scores, strict=True):
            ids = self.tokenizer.convert_tokens_to_ids(toks)
            log_prob = score * max(len(ids), 1) ** decode.lenpen
            body = ids[: ids.index(EOS)] if EOS in ids else ids
            body = body[:limit]
            lp = length_penalty(len(body) + 1, decode.lenpen, decode.length_norm)
            out.append(Hypothesis(body, log_prob, log_prob / lp))
        out.sort(key=lambda h: -h.score)
        return out[: decode.nbest]

    def _note(self, decode: DecodeConfig) -> None:
        """Say once, on stderr, where CTranslate2's beam search differs from t2's settings."""
        if self._noted or decode.beam_size == 1:
            return
        self._noted = True
        parts = []
        if decode.stopping != "first_k":
            parts.append(f"stops as decode.stopping=first_k, not {decode.stopping}")
        if decode.length_norm == "gnmt" and decode.lenpen != 0:
            parts.append(
                "ranks by n^alpha (it has no GNMT form; its finished hypotheses are "
                "re-ranked by ((5+n)/6)^alpha)"
            )
        if parts:
            print(f"note: CTranslate2's beam search {'; '.join(parts)}", file=sys.stderr)
