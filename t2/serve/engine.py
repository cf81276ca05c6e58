"""The one place that picks a translation engine: t2's own search over a run's checkpoint, or
CTranslate2 over a folder written by `t2 export --format ct2`. Both translate a list of
sentences with t2's batching (decode.batch_size sentences, sorted by length) and return
(text, score) n-best lists, so evaluation and translation read the same either way."""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from t2.config import Config, DecodeConfig
from t2.errors import CheckpointError, ConfigError
from t2.serve import ENGINES, PRECISIONS

NBest = list[list[tuple[str, float]]]


class Engine(ABC):
    """What every engine has: cfg (the run's config), ckpt (the folder it reads) and
    translate_nbest(sentences, decode)."""

    cfg: Config
    ckpt: Path
    workers: int = 1  # batches decoded at once (CTranslate2's inter_threads)

    @abstractmethod
    def translate_nbest(
        self, sentences: Sequence[str], decode: DecodeConfig, progress: Any = None
    ) -> NBest:
        """(text, score) n-best lists in input order, a blank line [("", 0.0)]; sentences
        decoded are counted on `progress` (a t2.progress.Progress), if given."""

    def translate(
        self, sentences: Sequence[str], decode: DecodeConfig, progress: Any = None
    ) -> list[str]:
        """The best translation of each sentence, in input order; blank lines stay blank."""
        nbest = self.translate_nbest(sentences, replace(decode, nbest=1), progress)
        return [hyps[0][0] for hyps in nbest]

    def stream(self, lines: Iterable[str], decode: DecodeConfig) -> Iterator[NBest]:
        """n-best lists for each batch of decode.batch_size lines (`workers` batches at a
        time), as soon as it is done."""
        it = iter(lines)
        while chunk := list(itertools.islice(it, decode.batch_size * self.workers)):
            yield self.translate_nbest(chunk, decode)


class T2Engine(Engine):
    """t2's own greedy and beam search (t2.decoding) over a checkpoint."""

    def __init__(
        self, path: str | Path, average_last: int = 0, device: str = "cpu",
        precision: str | None = None,
    ) -> None:  # fmt: skip
        import torch

        from t2.rundir import load_run

        self.model, self.cfg, self.tokenizer, self.ckpt = load_run(path, average_last, device)
        if precision is not None:  # every weight and table in that type (log-softmax in fp32)
            self.model = self.model.to(getattr(torch, precision))
        self.device = device

    def translate_nbest(
        self, sentences: Sequence[str], decode: DecodeConfig, progress: Any = None
    ) -> NBest:
        from t2.evaluation.evaluate import translate_nbest

        return translate_nbest(self.model, self.tokenizer, sentences, decode, self.device,
                               self.cfg.data.src_bos, progress)  # fmt: skip


def open_engine(path: str | Path, engine: str = "t2", average_last: int = 0,
                device: str = "cpu", precision: str | None = None,
                workers: int = 1) -> Engine:  # fmt: skip
    """The engine that translates with `path`: a run directory or checkpoint (t2), or an
    export folder (ct2); `precision` (PRECISIONS) is the type it computes in, None: as
    stored; `workers` (ct2 only) batches are decoded at once."""
    from t2.serve.ct2 import is_export

    if engine not in ENGINES:
        raise ConfigError(f"unknown engine {engine!r}; valid choices: {', '.join(ENGINES)}")
    if precision is not None and precision not in PRECISIONS:
        raise ConfigError(
            f"unknown precision {precision!r}; valid choices: {', '.join(PRECISIONS)}"
        )
    if workers < 1:
        raise ConfigError(f"--workers {workers}: pass a number of workers of at least 1")
    if engine == "t2":
        if workers != 1:
            raise ConfigError(
                "--workers is for --engine ct2 (CTranslate2's parallel batches); t2's own "
                "search decodes one batch at a time with every thread: leave --workers out"
            )
        if is_export(path):
            raise CheckpointError(f"{path} is a CTranslate2 export; pass --engine ct2")
        return T2Engine(path, average_last, device, precision)
    if average_last:
        raise ConfigError(
            "--average-last averages training checkpoints; average when exporting: "
            "t2 export RUN --format ct2 --average-last N --out DIR"
        )
    from t2.serve.ct2_engine import Ct2Engine

    return Ct2Engine(path, device, precision, workers)
