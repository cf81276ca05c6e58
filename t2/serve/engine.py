"""The translation service: text in, text out, over an engine's id-level decode.

An engine is built from the objects it is handed (a model or a CTranslate2 translator, the
tokenizer, whether the run put BOS in front of its sources), never from a path: t2.opener
reads folders. Everything about
text is written here once for every engine: blank lines stay blank and are not decoded,
the sources are encoded as in training (BOS in front where the run put one), a source
longer than the engine's position table fails naming its line, batches are sorted by
length, and the hypotheses are decoded back to text in input order.
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any

import torch
from torch.nn.utils.rnn import pad_sequence

from t2.data.batching import batch_seed
from t2.data.encode import encode_source
from t2.decoding.common import Hypothesis
from t2.decoding.options import DecodeConfig
from t2.decoding.search import search
from t2.errors import DataError
from t2.model.transformer import Transformer
from t2.progress import Progress
from t2.specials import PAD

NBest = list[list[tuple[str, float]]]


def length_batches(lengths: Sequence[int], batch_size: int) -> Iterator[list[int]]:
    """Indices in batches of similar length (longest first), so little padding is decoded."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


def pad_batch(rows: Sequence[list[int]], device: torch.device | str) -> torch.Tensor:
    """Right-padded (B, S) ids."""
    tensors = [torch.tensor(r, dtype=torch.long) for r in rows]
    return pad_sequence(tensors, batch_first=True, padding_value=PAD).to(device)


class Engine(ABC):
    """What every engine has: the tokenizer, the run's data.src_bos, and decode_ids."""

    tokenizer: Any  # a transformers PreTrainedTokenizerFast
    src_bos: bool = False  # BOS in front of each source, as the run trained (data.src_bos)
    workers: int = 1  # batches decoded at once (CTranslate2's inter_threads)

    @property
    @abstractmethod
    def max_positions(self) -> int | None:
        """The longest source the engine's position table holds; None: no limit."""

    @abstractmethod
    def decode_ids(
        self, src_ids: Sequence[list[int]], decode: DecodeConfig, progress: Progress | None
    ) -> list[list[Hypothesis]]:
        """n-best hypotheses of each source (ids with EOS), in input order; each batch's
        sentences are counted on `progress`, if given."""

    def translate_nbest(
        self, sentences: Sequence[str], decode: DecodeConfig, progress: Progress | None = None
    ) -> NBest:
        """(text, model score) n-best lists in input order; a blank line gets [("", 0.0)]."""
        keep = [i for i, s in enumerate(sentences) if s.strip()]
        out: NBest = [[("", 0.0)] for _ in sentences]
        if not keep:
            return out
        src_ids = encode_source(self.tokenizer, [sentences[i] for i in keep], self.src_bos)
        self._check_lengths(src_ids, [i + 1 for i in keep])
        hyps = self.decode_ids(src_ids, decode, progress)
        flat = [h for nbest in hyps for h in nbest]
        texts = iter(
            self.tokenizer.batch_decode([h.tokens for h in flat], skip_special_tokens=True)
        )
        for i, nbest in zip(keep, hyps, strict=True):
            out[i] = [(next(texts).strip(), h.score) for h in nbest]
        return out

    def translate(
        self, sentences: Sequence[str], decode: DecodeConfig, progress: Progress | None = None
    ) -> list[str]:
        """The best translation of each sentence, in input order; blank lines stay blank."""
        nbest = self.translate_nbest(sentences, replace(decode, nbest=1), progress)
        return [hyps[0][0] for hyps in nbest]

    def stream(self, lines: Iterable[str], decode: DecodeConfig) -> Iterator[NBest]:
        """n-best lists for each batch of decode.batch_size lines (`workers` batches at a
        time), as soon as it is done."""
        it = iter(lines)
        for k in itertools.count():
            if not (chunk := list(itertools.islice(it, decode.batch_size * self.workers))):
                return
            # each chunk its own sampling seed (reproducible; not the first chunk's draws again)
            yield self.translate_nbest(chunk, replace(decode, seed=batch_seed(decode.seed, 0, k)))

    def _check_lengths(self, src_ids: Sequence[list[int]], lines: Sequence[int]) -> None:
        """A positional scheme with a fixed table (learned): name the first line that does
        not fit. Schemes whose tables grow on demand have no limit."""
        limit = self.max_positions
        if limit is None:
            return
        for row, line in zip(src_ids, lines, strict=True):
            if len(row) > limit:
                raise DataError(
                    f"line {line} has {len(row)} tokens, more than model.max_positions={limit} "
                    f"of the model's position table; shorten or split that line"
                )


class TorchEngine(Engine):
    """t2's own searches (t2.decoding) over a model in memory."""

    def __init__(
        self,
        model: Transformer,
        tokenizer: Any,
        src_bos: bool = False,
        device: torch.device | str | None = None,
        precision: str | None = None,
    ) -> None:
        """`precision` (t2.serve.PRECISIONS): every weight and table cast to that type
        (log-softmax stays float32); None: as stored."""
        model = getattr(model, "module", model)  # unwrap DistributedDataParallel
        self.model = model if precision is None else model.to(getattr(torch, precision))
        self.tokenizer, self.src_bos = tokenizer, src_bos
        self.device = device if device is not None else next(self.model.parameters()).device

    @property
    def max_positions(self) -> int | None:
        return self.model.max_length

    def decode_ids(
        self, src_ids: Sequence[list[int]], decode: DecodeConfig, progress: Progress | None = None
    ) -> list[list[Hypothesis]]:
        """Batched by length; a sampling search draws from one generator seeded with
        decode.seed, so the same input, batch size and seed give the same samples."""
        model, out = self.model, [[] for _ in src_ids]
        generator = torch.Generator(self.device).manual_seed(decode.seed)
        was_training = model.training
        model.eval()
        try:
            for batch in length_batches([len(r) for r in src_ids], decode.batch_size):
                src = pad_batch([src_ids[i] for i in batch], self.device)
                for i, h in zip(batch, search(model, src, decode, generator), strict=True):
                    out[i] = h
                if progress is not None:
                    progress.update(len(batch))
        finally:
            model.train(was_training)
        return out


def translate(
    model: Transformer,
    tokenizer: Any,
    sentences: Sequence[str],
    decode: DecodeConfig,
    src_bos: bool = False,
    device: torch.device | str | None = None,
) -> list[str]:
    """The best translation of each sentence by a model in memory (validation, the Python
    API); pass src_bos=cfg.data.src_bos for runs trained with BOS in front of the source."""
    return TorchEngine(model, tokenizer, src_bos, device).translate(sentences, decode)
