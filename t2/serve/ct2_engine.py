"""Translate with a CTranslate2 export as t2's own search does: the same source ids, the same
length-sorted batches, the same maximum length and the same scores.

Greedy search gives t2's token ids: a batch is decoded in one call up to its longest maximum
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

import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from t2.config import DecodeConfig
from t2.data import encode_source, load_tokenizer
from t2.data.tokenizer import EOS, SPECIALS
from t2.decoding.search import Hypothesis, length_penalty
from t2.errors import DataError
from t2.evaluation.evaluate import length_batches
from t2.serve.ct2 import read_export, require_ctranslate2
from t2.serve.engine import Engine


def _device(device: str) -> tuple[str, int]:
    """'cpu', 'cuda' or 'cuda:N' -> CTranslate2's device and device index."""
    name, _, index = str(device).partition(":")
    return name, int(index or 0)


class Ct2Engine(Engine):
    """A CTranslate2 export folder (model.bin, its tokenizer and t2_export.json)."""

    def __init__(
        self, path: str | Path, device: str = "cpu", precision: str | None = None,
        workers: int = 1,
    ) -> None:  # fmt: skip
        """`workers` batches are decoded at once (CTranslate2's inter_threads), each with
        its share of torch's threads (at least one)."""
        require_ctranslate2()
        import ctranslate2
        import torch

        self.ckpt = Path(path)
        self.meta, self.cfg = read_export(path)
        self.tokenizer = load_tokenizer(path)
        self.workers = workers
        name, index = _device(device)
        self.translator = ctranslate2.Translator(
            str(path), device=name, device_index=index, inter_threads=workers,
            intra_threads=max(1, torch.get_num_threads() // workers),
            compute_type=precision or "default",  # default: the export's --quantization
        )  # fmt: skip
        self.max_positions: int | None = self.meta["max_positions"]
        self._noted = False

    def translate_nbest(
        self, sentences: Sequence[str], decode: DecodeConfig, progress: Any = None
    ) -> list[list[tuple[str, float]]]:
        """(text, score) n-best lists in input order; a blank line gets [("", 0.0)]."""
        keep = [i for i, s in enumerate(sentences) if s.strip()]
        out: list[list[tuple[str, float]]] = [[("", 0.0)] for _ in sentences]
        if not keep:
            return out
        src_ids = encode_source(self.tokenizer, [sentences[i] for i in keep], self.cfg.data.src_bos)
        self._check_lengths(src_ids, [i + 1 for i in keep])
        self._note(decode)
        hyps: list[list[Hypothesis]] = [[] for _ in src_ids]
        batches = list(length_batches([len(r) for r in src_ids], decode.batch_size))
        # every batch is queued at once; the translator's workers take them in turn
        pending = [self.submit([src_ids[i] for i in batch], decode) for batch in batches]
        for batch, collect in zip(batches, pending, strict=True):
            for i, h in zip(batch, collect(), strict=True):
                hyps[i] = h
            if progress is not None:
                progress.update(len(batch))
        flat = [h for nbest in hyps for h in nbest]
        decoded = self.tokenizer.batch_decode([h.tokens for h in flat], skip_special_tokens=True)
        texts = iter(decoded)
        for i, nbest in zip(keep, hyps, strict=True):
            out[i] = [(next(texts).strip(), h.score) for h in nbest]
        return out

    def limits(self, src_ids: Sequence[list[int]], decode: DecodeConfig) -> list[int]:
        """t2's maximum number of tokens before EOS of each source (search.max_lengths)."""
        out = [max(0, math.floor(decode.max_len_a * len(r) + decode.max_len_b)) for r in src_ids]
        if self.max_positions is not None:  # BOS takes one row of the position table
            out = [min(n, self.max_positions - 1) for n in out]
        return out

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
        head = 1 if self.cfg.data.src_bos else 0  # CTranslate2 adds BOS and EOS itself
        source = [self.tokenizer.convert_ids_to_tokens(r[head:-1]) for r in src_ids]
        longest = max(limits)
        jobs = self._translate(source, longest, decode)

        def collect() -> list[list[Hypothesis]]:
            results = [job.result() for job in jobs]
            # without a length penalty CTranslate2 ends a sentence once its best beam has
            # ended, so beams that t2 would end at a shorter limit leave no trace: go again
            blind = decode.beam_size > 1 and decode.lenpen == 0
            again = [i for i, r in enumerate(results) if limits[i] < longest
                     and (blind or self._reached(r.hypotheses, limits[i]))]  # fmt: skip
            for limit in sorted({limits[i] for i in again}):
                rows = [i for i in again if limits[i] == limit]
                redo = self._translate([source[i] for i in rows], limit, decode)
                for i, job in zip(rows, redo, strict=True):
                    results[i] = job.result()
            return [self._hypotheses(r.hypotheses, r.scores, limits[i], decode)
                    for i, r in enumerate(results)]  # fmt: skip

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
            source, beam_size=decode.beam_size, length_penalty=decode.lenpen,
            num_hypotheses=decode.beam_size if rerank else decode.nbest,
            max_decoding_length=limit + 1, min_decoding_length=0, max_input_length=0,
            return_scores=True, return_end_token=True, asynchronous=True,
            suppress_sequences=[[SPECIALS["pad"]], [SPECIALS["bos"]]],
        )  # fmt: skip

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

    def _check_lengths(self, src_ids: Sequence[list[int]], lines: Sequence[int]) -> None:
        """A position table has max_positions rows: name the first line that does not fit."""
        if self.max_positions is None:
            return
        for row, line in zip(src_ids, lines, strict=True):
            if len(row) > self.max_positions:
                raise DataError(
                    f"line {line} has {len(row)} tokens, more than the {self.max_positions} "
                    f"positions of the exported {self.cfg.model.positional} table; shorten or "
                    f"split that line"
                )

    def _note(self, decode: DecodeConfig) -> None:
        """Say once, on stderr, where CTranslate2's beam search differs from t2's settings."""
        if self._noted or decode.beam_size == 1:
            return
        self._noted = True
        parts = []
        if decode.stopping != "first_k":
            parts.append(f"stops as decode.stopping=first_k, not {decode.stopping}")
        if decode.length_norm == "gnmt" and decode.lenpen != 0:
            parts.append("ranks by n^alpha (it has no GNMT form; its finished hypotheses are "
                         "re-ranked by ((5+n)/6)^alpha)")  # fmt: skip
        if parts:
            print(f"note: CTranslate2's beam search {'; '.join(parts)}", file=sys.stderr)
