"""A joint source-target BPE (Sennrich et al. 2016) with Hugging Face `tokenizers`.

Byte-level pre-tokenization (GPT-2, Radford et al. 2019) makes decoding give back the exact
text; the folder loads with `transformers.PreTrainedTokenizerFast.from_pretrained`. A run's
BPE is learnt once per training data and vocabulary settings, from a seeded sample of the
pairs (data.tokenizer_sample, as SentencePiece's input_sentence_size), and kept in the data
cache for every later run, seed and sweep arm on the same data.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from t2.atomic import atomic_folder
from t2.data.cache import SUMS, load_folder, save_folder
from t2.data.config import DataConfig
from t2.data.pipeline import CACHE_VERSION, cache_root, digest, load_pairs, pair_batches
from t2.data.stages import Heartbeat, note, stage
from t2.errors import DataError
from t2.progress import on_terminal
from t2.specials import SPECIALS

FULL_ALPHABET_FROM = 1000  # vocabularies this large hold all 256 bytes: no input is unknown
SAMPLE_SEED = 2016  # the tokenizer sample's own seed (not train.seed); the year of BPE for NMT
SAMPLE = "sample.json"  # what a cached tokenizer was learnt from
TRAIN_COMMAND = "python tokenizer/train_tokenizer.py --recipe NAME --out DIR"


def build_tokenizer(split_digits: bool) -> Tokenizer:
    """An untrained BPE: NFC, byte-level pieces with a leading space, digits optionally apart."""
    tok = Tokenizer(models.BPE(unk_token=SPECIALS["unk"]))
    tok.normalizer = normalizers.NFC()
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    # Digits after ByteLevel: it maps the ASCII digits to themselves, so they stay findable.
    digits = [pre_tokenizers.Digits(individual_digits=True)] if split_digits else []
    tok.pre_tokenizer = pre_tokenizers.Sequence([byte_level, *digits])
    # Strip drops the space that add_prefix_space put in front of the first word.
    tok.decoder = decoders.Sequence([decoders.ByteLevel(), decoders.Strip(" ", 1, 0)])
    return tok


def wrap(tok: Tokenizer) -> PreTrainedTokenizerFast:
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=SPECIALS["pad"],
        bos_token=SPECIALS["bos"],
        eos_token=SPECIALS["eos"],
        unk_token=SPECIALS["unk"],
        clean_up_tokenization_spaces=False,  # " ." must decode as " .", not "."
    )


def learn_bpe(
    texts: Iterable[str],
    vocab_size: int,
    min_frequency: int,
    split_digits: bool,
    total: int | None = None,
) -> PreTrainedTokenizerFast:
    """A joint BPE learnt from `texts` (`total` of them, if known: for the progress)."""
    if vocab_size <= len(SPECIALS):
        raise DataError(f"data.vocab_size={vocab_size} is too small; use at least 100")
    tok = build_tokenizer(split_digits)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIALS.values()),  # first, in this order: ids 0..3
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        if vocab_size >= FULL_ALPHABET_FROM
        else [],
        show_progress=on_terminal(),  # tokenizers' own bars; a log file gets t2's lines
    )
    merges = Heartbeat("tokenizer: computing the merges", bar_drawn=True)
    try:
        tok.train_from_iterator(_nonempty(texts, total, merges), trainer, length=total)
    finally:
        merges.stop()
    if tok.get_vocab_size() <= len(SPECIALS):
        raise DataError("the tokenizer saw no text; check that the train split has pairs")
    return wrap(tok)


def train_tokenizer(
    texts: Iterable[str],
    vocab_size: int,
    min_frequency: int,
    split_digits: bool,
    out_dir: Path,
    total: int | None = None,
) -> PreTrainedTokenizerFast:
    """Train a joint BPE on `texts` (learn_bpe) and save it to out_dir (replaced atomically)."""
    wrapped = learn_bpe(texts, vocab_size, min_frequency, split_digits, total)
    save_tokenizer(wrapped, out_dir)
    return wrapped


def save_tokenizer(
    tokenizer: PreTrainedTokenizerFast, folder: Path, sample: str | None = None
) -> None:
    """A tokenizer's folder (tokenizer.json and transformers' files, and the text of its
    sample.json if given), replaced atomically."""
    with atomic_folder(folder) as tmp:
        tokenizer.save_pretrained(tmp)
        if sample is not None:
            (tmp / SAMPLE).write_text(sample, encoding="utf-8")


def tokenizer_from_json(text: str) -> PreTrainedTokenizerFast:
    """A t2 tokenizer from the text of its tokenizer.json (what the main process of a
    multi-node job sends the others: t2.train.nodes.shared_tokenizer)."""
    return wrap(Tokenizer.from_str(text))


def _nonempty(texts: Iterable[str], total: int | None, merges: Heartbeat) -> Iterator[str]:
    """The non-empty texts, counted on a log file's progress lines (the trainer draws the
    terminal's bar); when they run out, the merges begin."""
    with stage("tokenizer: reading", total, "texts", bar=False) as progress:
        for text in texts:
            if text:
                yield text
            progress.update(1)
    if progress.lines:
        print("tokenizer: computing the merges", file=sys.stderr, flush=True)
    merges.start()


def load_tokenizer(folder: str | Path) -> PreTrainedTokenizerFast:
    """A trained tokenizer folder, checked for the special tokens at ids 0..3."""
    folder = Path(folder)
    if not (folder / "tokenizer.json").is_file():
        raise DataError(
            f"{folder}: no tokenizer (tokenizer.json) there; train one with {TRAIN_COMMAND} "
            f"or leave data.tokenizer empty"
        )
    try:
        tok = PreTrainedTokenizerFast.from_pretrained(folder)
    except (OSError, ValueError) as err:
        raise DataError(f"{folder}: cannot load the tokenizer ({err}); retrain it") from None
    expected = {name: i for i, name in enumerate(SPECIALS.values())}
    found = {name: tok.convert_tokens_to_ids(name) for name in expected}
    ids = (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id, tok.unk_token_id)
    if found != expected or ids != (0, 1, 2, 3):
        raise DataError(
            f"{folder}: special tokens are {found}, expected {expected}; "
            f"train a t2 tokenizer with {TRAIN_COMMAND}"
        )
    return tok


def prepare_tokenizer(
    cfg: DataConfig, folder: Path | None, seed: int, reuse: bool = True
) -> PreTrainedTokenizerFast:
    """data.tokenizer if set, else `folder` (a run's tokenizer/) if `reuse` (resume), else
    the BPE of the train split from the data cache (learnt there first if it is not yet:
    cached_tokenizer), copied to `folder`. A new run passes reuse=False: a tokenizer left
    by a run that failed before its first checkpoint may come from other data or another
    vocab_size."""
    if cfg.tokenizer:
        print(f"tokenizer: loading {cfg.tokenizer} (data.tokenizer)", flush=True)
        tokenizer = load_tokenizer(cfg.tokenizer)
        if folder is not None and not (reuse and (Path(folder) / "tokenizer.json").is_file()):
            copy_folder(Path(cfg.tokenizer), Path(folder))  # the run keeps its own copy
        note("tokenizer", {"folder": str(cfg.tokenizer)})
        return tokenizer
    if reuse and folder is not None and Path(folder).is_dir():
        print(f"tokenizer: reusing {folder}", flush=True)
        tokenizer = load_tokenizer(folder)
        _note_sample(Path(folder))
        return tokenizer
    cache, tokenizer = cached_tokenizer(cfg, load_pairs(cfg, "train", seed))
    if folder is not None:
        copy_folder(cache, Path(folder))
    return tokenizer


def cached_tokenizer(
    cfg: DataConfig, pairs: datasets.Dataset
) -> tuple[Path, PreTrainedTokenizerFast]:
    """The BPE of these pairs and vocabulary settings, from the data cache; learnt from a
    sample of data.tokenizer_sample pairs (SAMPLE_SEED) and saved there if not yet. Its
    folder holds a plain tokenizer.json and what transformers' fast tokenizer reads."""
    settings = cfg.vocab_size, cfg.min_frequency, cfg.split_digits, cfg.tokenizer_sample
    key = digest(CACHE_VERSION, "bpe", pairs._fingerprint, *settings, SAMPLE_SEED)
    folder = cache_root(cfg) / "tokenizers" / key
    tokenizer = load_folder(folder, load_tokenizer, "tokenizer: check the cache")
    if tokenizer is not None:
        print(f"tokenizer: reusing the data cache's {folder}", flush=True)
    else:
        rows = sample_rows(len(pairs), cfg.tokenizer_sample)
        count = len(pairs) if rows is None else len(rows)
        of = "" if rows is None else f" (a sample of the {len(pairs)}, data.tokenizer_sample)"
        print(f"tokenizer: training a joint BPE of {cfg.vocab_size} on {count} pairs{of}")

        def fill(tmp: Path) -> None:
            texts = sample_texts(pairs, rows)
            learn_bpe(texts, *settings[:3], total=2 * count).save_pretrained(tmp)
            facts = {"sample_pairs": count, "pairs": len(pairs), "sample_seed": SAMPLE_SEED}
            (tmp / SAMPLE).write_text(json.dumps(facts), encoding="utf-8")

        save_folder(folder, fill)
        tokenizer = load_tokenizer(folder)
    _note_sample(folder)
    return folder, tokenizer


def _note_sample(folder: Path) -> None:
    """Record in the run what the tokenizer in `folder` was learnt from, if it says."""
    with contextlib.suppress(OSError, ValueError):
        note("tokenizer", json.loads((folder / SAMPLE).read_text(encoding="utf-8")))


def sample_rows(pairs: int, sample: int) -> np.ndarray | None:
    """Which pairs the BPE learns from, ascending (None: every pair): `sample` of them
    drawn with SAMPLE_SEED, so that every run on the same data draws the same."""
    if sample == 0 or sample >= pairs:
        return None
    rng = np.random.default_rng(SAMPLE_SEED)
    return np.sort(rng.choice(pairs, size=sample, replace=False))


def sample_texts(pairs: datasets.Dataset, rows: np.ndarray | None) -> Iterator[str]:
    """Source and target texts of the pairs at `rows` (None: all), a batch at a time."""
    start = 0
    for batch in pair_batches(pairs):
        taken = batch
        if rows is not None:
            lo, hi = np.searchsorted(rows, [start, start + batch.num_rows])
            taken = batch.take(pa.array(rows[lo:hi] - start))
        start += batch.num_rows
        yield from taken["src"].to_pylist()
        yield from taken["tgt"].to_pylist()


def copy_folder(source: Path, target: Path) -> None:
    """`source`'s files (but a cache's checksums) as `target`, whole or not at all."""
    with atomic_folder(target) as tmp:
        shutil.copytree(source, tmp, dirs_exist_ok=True, ignore=shutil.ignore_patterns(SUMS))
