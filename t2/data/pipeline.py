"""From a recipe's data section to cleaned pairs and token ids, cached between runs.

Cleaned pairs are saved under the cache folder, keyed by the source (file sizes and times
included) and the cleaning options; tokenized data is `datasets.map`'s own cache beside it,
keyed by the tokenizer, so a second run reads both back instead of recomputing them. Both
carry checksums, and a damaged cache is set aside and rebuilt (t2.data.cache).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import datasets
import numpy as np
from transformers import PreTrainedTokenizerFast

from t2.data.cache import cached_files, file_damage, load_folder, save_folder, set_aside
from t2.data.clean import Report, clean_pairs, length_mask, map_procs
from t2.data.config import DataConfig
from t2.data.sources import SPLITS, parse_spec, read_source
from t2.errors import ConfigError, DataError
from t2.progress import Progress, datasets_bars, on_terminal

CACHE_VERSION = 2  # bump when cleaning or encoding changes, to invalidate old caches


def cache_root(cfg: DataConfig) -> Path:
    """data.cache_dir, else the datasets cache (HF_DATASETS_CACHE) / t2."""
    return Path(cfg.cache_dir or Path(datasets.config.HF_DATASETS_CACHE) / "t2")


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]


def _source_key(cfg: DataConfig, split: str, seed: int) -> str:
    """What the cleaned pairs depend on: source, file stats or task seed, and cleaning options."""
    spec = getattr(cfg, split)
    scheme, rest = parse_spec(spec, f"data.{split}")
    extra: list[Any] = []
    if scheme == "task":
        extra = [seed, cfg.task_train_size if split == "train" else cfg.task_eval_size]
    elif scheme == "files":
        for lang in (cfg.src_lang, cfg.tgt_lang):
            path = Path(f"{rest}.{lang}")
            stat = path.stat() if path.is_file() else None
            extra.append([os.path.abspath(path), stat and stat.st_size, stat and stat.st_mtime_ns])
    elif scheme == "hf":
        return ""  # hub and local datasets: the loaded dataset's fingerprint is the key
    limit = cfg.max_train_pairs if split == "train" else 0
    return _digest(CACHE_VERSION, spec, split, cfg.src_lang, cfg.tgt_lang, cfg.dedup, limit, extra)


def load_pairs(cfg: DataConfig, split: str, seed: int) -> datasets.Dataset:
    """Cleaned pairs of a split (columns src, tgt); prints what each rule dropped."""
    if split not in SPLITS:
        raise ConfigError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")
    key = _source_key(cfg, split, seed)
    raw = None
    if not key:  # hf: load (cached by datasets) to learn its fingerprint
        raw = read_source(cfg, split, seed)
        limit = cfg.max_train_pairs if split == "train" else 0
        key = _digest(
            CACHE_VERSION, raw._fingerprint, split, cfg.src_lang, cfg.tgt_lang, cfg.dedup, limit
        )
    folder = cache_root(cfg) / "pairs" / key
    cached = load_folder(folder, _read_cached)
    if cached is not None:
        report, ds = cached
        print(f"{report.line()} (cached in {folder})", flush=True)
        return ds
    raw = raw if raw is not None else read_source(cfg, split, seed)
    report = Report(split, len(raw))
    ds = clean_pairs(raw, report, cfg.dedup, cfg.num_proc)
    if split == "train" and 0 < cfg.max_train_pairs < len(ds):
        report.dropped[f"beyond max_train_pairs={cfg.max_train_pairs}"] = (
            len(ds) - cfg.max_train_pairs
        )
        ds = ds.select(range(cfg.max_train_pairs))
    print(report.line(), flush=True)
    if report.kept == 0:
        raise DataError(
            f"data.{split}={getattr(cfg, split)} has no pairs left after cleaning; check the source"
        )
    flat = ds.flatten_indices().select_columns(["src", "tgt"])

    def fill(tmp: Path) -> None:
        flat.save_to_disk(os.fspath(tmp / "pairs"))
        (tmp / "report.json").write_text(json.dumps(report.__dict__))

    save_folder(folder, fill)
    return datasets.load_from_disk(os.fspath(folder / "pairs"))


def _read_cached(folder: Path) -> tuple[Report, datasets.Dataset]:
    report = Report(**json.loads((folder / "report.json").read_text()))
    return report, datasets.load_from_disk(os.fspath(folder / "pairs"))


def _checked_map(ds: datasets.Dataset, encode: Any, fingerprint: str) -> datasets.Dataset:
    """`encode()` (ds.map), whose cached files are checked: cached files that fail to load
    or to match their checksums are set aside and encoded again."""
    if not ds.cache_files:  # in memory: datasets caches nothing
        return encode()
    folder = Path(ds.cache_files[0]["filename"]).parent
    try:
        encoded = encode()
        problem = file_damage([Path(f["filename"]) for f in encoded.cache_files])
    except Exception as err:
        if not cached_files(folder, fingerprint):  # not the cache's fault
            raise
        problem = f"it does not load: {(str(err).strip().splitlines() or [''])[0][:200]}"
    if problem is None:
        return encoded
    set_aside(cached_files(folder, fingerprint), problem)
    encoded = encode(load_from_cache_file=False)
    file_damage([Path(f["filename"]) for f in encoded.cache_files])  # records the checksums
    return encoded


def tokenizer_digest(tokenizer: PreTrainedTokenizerFast) -> str:
    return hashlib.sha256(tokenizer.backend_tokenizer.to_str().encode()).hexdigest()[:20]


def _encode_batch(
    batch: dict[str, list[str]],
    tokenizer: PreTrainedTokenizerFast,
    src_bos: bool,
    progress: Progress | None = None,
) -> dict[str, list]:
    """src_ids = [bos?] tokens [eos]; tgt_ids = [bos] tokens [eos]; lengths beside them."""
    if progress is not None:  # in this process only (num_proc 1): a log file's lines
        progress.update(len(batch["src"]))
    src = encode_source(tokenizer, batch["src"], src_bos)
    backend = tokenizer.backend_tokenizer
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    tgt = [
        [bos, *e.ids, eos]
        for e in backend.encode_batch_fast(batch["tgt"], add_special_tokens=False)
    ]
    return {
        "src_ids": src,
        "tgt_ids": tgt,
        "src_len": [len(s) for s in src],
        "tgt_len": [len(t) for t in tgt],
    }


def encode_source(
    tokenizer: PreTrainedTokenizerFast, texts: list[str], src_bos: bool
) -> list[list[int]]:
    """Source ids as the model sees them in training: [bos if src_bos] tokens [eos]."""
    head = [tokenizer.bos_token_id] if src_bos else []
    eos = tokenizer.eos_token_id
    encoded = tokenizer.backend_tokenizer.encode_batch_fast(texts, add_special_tokens=False)
    return [[*head, *e.ids, eos] for e in encoded]


def encode_pairs(
    ds: datasets.Dataset, tokenizer: PreTrainedTokenizerFast, cfg: DataConfig, split: str
) -> datasets.Dataset:
    """Add src_ids, tgt_ids (and src_len, tgt_len); drop over-long train pairs, reporting them."""
    fingerprint = _digest(CACHE_VERSION, ds._fingerprint, tokenizer_digest(tokenizer), cfg.src_bos)
    procs, total = map_procs(ds, cfg.num_proc), len(ds)
    # datasets draws the terminal's bar; in a log file, plain lines from t2.progress instead
    progress = Progress(total, f"encode {split}", "pairs", bar=False)
    kwargs = {
        "tokenizer": tokenizer,
        "src_bos": cfg.src_bos,
        "progress": progress if procs is None else None,
    }
    with progress, datasets_bars(on_terminal()):
        encode = functools.partial(
            ds.map,
            _encode_batch,
            batched=True,
            batch_size=2000,
            num_proc=procs,
            fn_kwargs=kwargs,
            new_fingerprint=fingerprint,
            desc=f"encode {split}",
        )
        ds = _checked_map(ds, encode, fingerprint)
        progress.update(total - progress.n)  # read from the cache, or counted by workers
    if split != "train":  # valid and test are scored against references: keep every pair
        return ds
    lengths = ds.with_format("numpy", columns=["src_len", "tgt_len"])[:]
    specials = 1 + int(cfg.src_bos), 2  # counted on the text's own tokens
    report = Report(f"{split} tokens", len(ds))
    keep = length_mask(
        lengths["src_len"] - specials[0],
        lengths["tgt_len"] - specials[1],
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
    return ds if keep.all() else ds.select(np.flatnonzero(keep))
