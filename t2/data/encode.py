"""Token ids of cleaned pairs, on every core, cached beside the pairs.

src_ids = [bos?] tokens [eos] and tgt_ids = [bos] tokens [eos], as int32 Arrow lists with
their lengths beside them (src_len, tgt_len): one Arrow stream keyed by the pairs, the
tokenizer and data.src_bos, written a chunk at a time and memory-mapped when read, so that
the lengths reach the batch sampler as NumPy arrays (t2.data.pipeline.column). The
tokenizer's Rust code runs in data.num_proc threads (auto: one per core).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import chain
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import pyarrow as pa
from transformers import PreTrainedTokenizerFast

from t2.data.cache import load_folder, open_stream, save_folder, write_stream
from t2.data.clean import Report, length_mask
from t2.data.config import DataConfig
from t2.data.pipeline import CACHE_VERSION, cache_root, column, digest, pair_batches, take_rows
from t2.data.stages import stage
from t2.errors import DataError

IDS = "ids.arrow"
SLICE = 4096  # texts a thread encodes at a time (the Encoding objects of a slice are alive)


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def threads(cfg: DataConfig) -> int:
    return cores() if cfg.num_proc == "auto" else int(cfg.num_proc)


def tokenizer_digest(tokenizer: PreTrainedTokenizerFast) -> str:
    return hashlib.sha256(tokenizer.backend_tokenizer.to_str().encode()).hexdigest()[:20]


def encode_source(
    tokenizer: PreTrainedTokenizerFast, texts: list[str], src_bos: bool
) -> list[list[int]]:
    """Source ids as the model sees them in training: [bos if src_bos] tokens [eos]."""
    head = [tokenizer.bos_token_id] if src_bos else []
    eos = tokenizer.eos_token_id
    encoded = tokenizer.backend_tokenizer.encode_batch_fast(texts, add_special_tokens=False)
    return [[*head, *e.ids, eos] for e in encoded]


@contextlib.contextmanager
def _one_thread_each() -> Iterator[None]:
    """`tokenizers` without its own thread pool (TOKENIZERS_PARALLELISM, read at each call):
    t2's threads share the cores among them instead."""
    before = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        yield
    finally:
        if before is None:
            del os.environ["TOKENIZERS_PARALLELISM"]
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = before


class Encoder:
    """Texts to Arrow lists of ids with the tokenizer's Rust code in `n` threads."""

    def __init__(self, tokenizer: PreTrainedTokenizerFast, n: int) -> None:
        self.backend, self.pool = tokenizer.backend_tokenizer, ThreadPoolExecutor(n)

    def _ids(self, texts: list[str], head: list[int], tail: list[int]) -> tuple[np.ndarray, ...]:
        encoded = self.backend.encode_batch_fast(texts, add_special_tokens=False)
        extra = len(head) + len(tail)
        lengths = np.fromiter((len(e.ids) + extra for e in encoded), np.int32, len(encoded))
        rows = chain.from_iterable(chain(head, e.ids, tail) for e in encoded)
        return lengths, np.fromiter(rows, np.int32, int(lengths.sum()))

    def lists(self, texts: list[str], head: list[int], tail: list[int]) -> pa.ListArray:
        """Each text's ids between `head` and `tail`, as one Arrow list array."""
        slices = [texts[i : i + SLICE] for i in range(0, len(texts), SLICE)]
        parts = list(self.pool.map(lambda t: self._ids(t, head, tail), slices))
        lengths = np.concatenate([p[0] for p in parts] or [np.zeros(0, np.int32)])
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        values = np.concatenate([p[1] for p in parts] or [np.zeros(0, np.int32)])
        return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))

    def close(self) -> None:
        self.pool.shutdown()


def _encoded(
    batches: Iterator[pa.RecordBatch], tokenizer: Any, cfg: DataConfig, progress: Any
) -> Iterator[pa.RecordBatch]:
    """The ids of each batch of pairs, and their lengths."""
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    encoder = Encoder(tokenizer, threads(cfg))
    try:
        with _one_thread_each():
            for batch in batches:
                src = encoder.lists(batch["src"].to_pylist(), [bos] if cfg.src_bos else [], [eos])
                tgt = encoder.lists(batch["tgt"].to_pylist(), [bos], [eos])
                progress.update(len(src))
                yield pa.RecordBatch.from_pydict(
                    {
                        "src_ids": src,
                        "tgt_ids": tgt,
                        "src_len": pa.array(np.diff(src.offsets.to_numpy()), pa.int32()),
                        "tgt_len": pa.array(np.diff(tgt.offsets.to_numpy()), pa.int32()),
                    }
                )
    finally:
        encoder.close()


def encode_pairs(
    ds: datasets.Dataset, tokenizer: PreTrainedTokenizerFast, cfg: DataConfig, split: str
) -> datasets.Dataset:
    """The pairs with src_ids, tgt_ids, src_len and tgt_len beside them; over-long train
    pairs dropped (by a select), with a report of them."""
    key = digest(CACHE_VERSION, ds._fingerprint, tokenizer_digest(tokenizer), cfg.src_bos)
    folder = cache_root(cfg) / "ids" / key
    ids = load_folder(folder, lambda f: open_stream(f / IDS), f"data {split}: check the cache")
    if ids is None:
        with stage(f"data {split}: encode", len(ds)) as progress:

            def fill(tmp: Path) -> None:
                write_stream(tmp / IDS, _encoded(pair_batches(ds), tokenizer, cfg, progress))

            save_folder(folder, fill)
        ids = open_stream(folder / IDS)
    ds = datasets.concatenate_datasets([ds.flatten_indices() if ds._indices else ds, ids], axis=1)
    if split != "train":  # valid and test are scored against references: keep every pair
        return ds
    specials = 1 + int(cfg.src_bos), 2  # counted on the text's own tokens
    report = Report(f"{split} tokens", len(ds))
    keep = length_mask(
        column(ds, "src_len") - specials[0],
        column(ds, "tgt_len") - specials[1],
        cfg.max_tokens_per_sentence,
        cfg.max_length_ratio,
        report,
    )
    print(report.line(), flush=True)
    if not keep.any():
        raise DataError(
            f"every train pair is longer than data.max_tokens_per_sentence="
            f"{cfg.max_tokens_per_sentence} or beyond data.max_length_ratio; raise them"
        )
    return ds if keep.all() else take_rows(ds, np.flatnonzero(keep))
