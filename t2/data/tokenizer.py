"""A joint source-target BPE (Sennrich et al. 2016) with Hugging Face `tokenizers`.

Byte-level pre-tokenization (GPT-2, Radford et al. 2019) makes decoding give back the exact
text; the folder loads with `transformers.PreTrainedTokenizerFast.from_pretrained`.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import datasets
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from t2.atomic import atomic_folder
from t2.data.config import DataConfig
from t2.data.pipeline import load_pairs
from t2.errors import DataError
from t2.progress import Progress, on_terminal
from t2.specials import SPECIALS

FULL_ALPHABET_FROM = 1000  # vocabularies this large hold all 256 bytes: no input is unknown
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


def train_tokenizer(
    texts: Iterable[str],
    vocab_size: int,
    min_frequency: int,
    split_digits: bool,
    out_dir: Path,
    total: int | None = None,
) -> PreTrainedTokenizerFast:
    """Train a joint BPE on `texts` (`total` of them, if known: for the progress) and save it
    to out_dir (replaced atomically)."""
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
    tok.train_from_iterator(_nonempty(texts, total), trainer, length=total)
    if tok.get_vocab_size() <= len(SPECIALS):
        raise DataError("the tokenizer saw no text; check that the train split has pairs")
    wrapped = wrap(tok)
    save_tokenizer(wrapped, out_dir)
    return wrapped


def save_tokenizer(tokenizer: PreTrainedTokenizerFast, folder: Path) -> None:
    """A tokenizer's folder (tokenizer.json and transformers' files), replaced atomically."""
    with atomic_folder(folder) as tmp:
        tokenizer.save_pretrained(tmp)


def tokenizer_from_json(text: str) -> PreTrainedTokenizerFast:
    """A t2 tokenizer from the text of its tokenizer.json (what the main process of a
    multi-node job sends the others: t2.train.nodes.shared_tokenizer)."""
    return wrap(Tokenizer.from_str(text))


def _nonempty(texts: Iterable[str], total: int | None) -> Iterator[str]:
    """The non-empty texts, counted on a log file's progress lines (the trainer draws the
    terminal's bar)."""
    with Progress(total, "tokenizer: reading", "texts", bar=False) as progress:
        for text in texts:
            if text:
                yield text
            progress.update(1)
    if progress.lines:
        print("tokenizer: computing the merges", file=sys.stderr, flush=True)


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
    train on the train split and save it to `folder`. A new run passes reuse=False: a
    tokenizer left by a run that failed before its first checkpoint may come from other
    data or another vocab_size."""
    if cfg.tokenizer:
        print(f"tokenizer: loading {cfg.tokenizer} (data.tokenizer)", flush=True)
        tokenizer = load_tokenizer(cfg.tokenizer)
        if folder is not None and not (reuse and (Path(folder) / "tokenizer.json").is_file()):
            copy_folder(Path(cfg.tokenizer), Path(folder))  # the run keeps its own copy
        return tokenizer
    if reuse and folder is not None and Path(folder).is_dir():
        print(f"tokenizer: reusing {folder}", flush=True)
        return load_tokenizer(folder)
    pairs = load_pairs(cfg, "train", seed)
    texts = both_sides(pairs)
    print(f"tokenizer: training a joint BPE of {cfg.vocab_size} on {len(pairs)} pairs", flush=True)
    args = (cfg.vocab_size, cfg.min_frequency, cfg.split_digits)
    if folder is not None:
        return train_tokenizer(texts, *args, Path(folder), total=2 * len(pairs))
    with tempfile.TemporaryDirectory() as tmp:
        return train_tokenizer(texts, *args, Path(tmp) / "bpe", total=2 * len(pairs))


def copy_folder(source: Path, target: Path) -> None:
    """`source`'s files as `target`, whole or not at all (t2.atomic)."""
    with atomic_folder(target) as tmp:
        shutil.copytree(source, tmp, dirs_exist_ok=True)


def both_sides(pairs: datasets.Dataset) -> Iterator[str]:
    """Source and target texts of each batch of pairs, for training a joint vocabulary."""
    for batch in pairs.select_columns(["src", "tgt"]).iter(batch_size=10000):
        yield from batch["src"]
        yield from batch["tgt"]
