"""The joint BPE: fixed special ids, exact round trips, digit splitting, reuse and clear errors."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from transformers import PreTrainedTokenizerFast

from t2.config import DataConfig
from t2.data.tokenizer import load_tokenizer, prepare_tokenizer, train_tokenizer
from t2.errors import DataError
from t2.specials import SPECIALS

GERMAN = [
    "Die Größe der Straße beträgt 12,5 km – nicht 13!",
    "Er sagte: „Äpfel, Öl und Übermut?“ – ‚ja‘.",
    "Am 24.12.1999 um 18:30 Uhr (MEZ) kostete es 1.234,56 € bzw. 99 %.",
    "Weiß ist heiß; »Zitat« & <Tag> #1 @home ~ 50/50.",
]
ENGLISH = [
    "He said \"hello\" and it's 1981's best - isn't it?",
    "The size: 3.14159 m², 42% of $1,000,000; e.g. [a] {b}.",
    "Smart quotes \u201clike these\u201d and \u2018these\u2019 come back too…",
]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> PreTrainedTokenizerFast:
    out = tmp_path_factory.mktemp("tok") / "bpe"
    return train_tokenizer((GERMAN + ENGLISH) * 20, 400, 2, False, out)


def test_special_tokens_have_fixed_ids(tokenizer: PreTrainedTokenizerFast) -> None:
    assert list(SPECIALS.values()) == ["<pad>", "<s>", "</s>", "<unk>"]
    assert (tokenizer.pad_token_id, tokenizer.bos_token_id) == (0, 1)
    assert (tokenizer.eos_token_id, tokenizer.unk_token_id) == (2, 3)
    assert tokenizer.convert_ids_to_tokens([0, 1, 2, 3]) == list(SPECIALS.values())


@pytest.mark.parametrize("text", GERMAN + ENGLISH)
def test_round_trip_is_exact(tokenizer: PreTrainedTokenizerFast, text: str) -> None:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == text
    with_specials = [1, *ids, 2, 0, 0]
    assert tokenizer.decode(with_specials, skip_special_tokens=True) == text


def test_folder_loads_with_transformers(tokenizer, tmp_path_factory) -> None:
    out = tmp_path_factory.mktemp("again") / "bpe"
    train_tokenizer(GERMAN * 5, 300, 1, False, out)
    loaded = PreTrainedTokenizerFast.from_pretrained(out)
    assert loaded.pad_token == "<pad>" and loaded.pad_token_id == 0
    assert loaded.decode(loaded(GERMAN[0], add_special_tokens=False)["input_ids"]) == GERMAN[0]
    assert load_tokenizer(out).get_vocab() == loaded.get_vocab()


def test_split_digits_gives_one_token_per_digit(tmp_path: Path) -> None:
    texts = ["in 1981 and 2004 or 1981 and 19 81"] * 30
    whole = train_tokenizer(texts, 300, 1, False, tmp_path / "whole")
    split = train_tokenizer(texts, 300, 1, True, tmp_path / "split")
    assert any("1981" in t for t in whole.tokenize("in 1981"))
    pieces = split.tokenize("in 1981")
    assert [p for p in pieces if any(c.isdigit() for c in p)] == ["1", "9", "8", "1"]
    ids = split("and 2004 in 19 8104", add_special_tokens=False)["input_ids"]
    assert split.decode(ids) == "and 2004 in 19 8104"


def test_large_vocabularies_cover_every_byte(tmp_path: Path) -> None:
    # With >= 1000 entries the 256-byte alphabet is included: unseen scripts never become <unk>.
    tok = train_tokenizer(ENGLISH * 10, 1000, 2, False, tmp_path / "big")
    text = "Neu: 東京, Ελλάδα, emoji 🚀"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert 3 not in ids and tok.decode(ids) == text


def test_load_tokenizer_errors_name_the_folder_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(
        DataError, match=r"nothing: no tokenizer .* train one with python tokenizer/"
    ):
        load_tokenizer(tmp_path / "nothing")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "tokenizer.json").write_text("{not json")
    with pytest.raises(DataError, match=r"bad: cannot load the tokenizer"):
        load_tokenizer(tmp_path / "bad")


def test_foreign_special_token_ids_are_refused(tmp_path: Path, tokenizer) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    other = Tokenizer(models.BPE(unk_token="[UNK]"))
    other.pre_tokenizer = pre_tokenizers.Whitespace()
    other.train_from_iterator(ENGLISH, trainers.BpeTrainer(special_tokens=["[UNK]", "[PAD]"]))
    wrapped = PreTrainedTokenizerFast(tokenizer_object=other, pad_token="[PAD]", unk_token="[UNK]")
    wrapped.save_pretrained(tmp_path / "foreign")
    with pytest.raises(DataError, match="expected .*train a t2 tokenizer"):
        load_tokenizer(tmp_path / "foreign")


def test_prepare_tokenizer_trains_once_then_reuses(tmp_path: Path, capsys) -> None:
    cfg = DataConfig(
        train="task:fake_dates",
        task_train_size=300,
        vocab_size=120,
        cache_dir=str(tmp_path / "cache"),
    )
    folder = tmp_path / "run" / "tokenizer"
    first = prepare_tokenizer(cfg, folder, seed=1)
    assert (folder / "tokenizer.json").is_file()
    assert "training a joint BPE of 120 on 300 pairs" in capsys.readouterr().out
    again = prepare_tokenizer(cfg, folder, seed=1)
    assert f"reusing {folder}" in capsys.readouterr().out
    assert again.get_vocab() == first.get_vocab()
    named = DataConfig(tokenizer=str(folder))
    assert prepare_tokenizer(named, None, seed=1).get_vocab() == first.get_vocab()
    assert "(data.tokenizer)" in capsys.readouterr().out
    in_memory = prepare_tokenizer(cfg, None, seed=1)  # no run folder: trained, not saved
    assert in_memory.get_vocab() == first.get_vocab()
    sample = "april 11 1981 saturday"
    assert first.decode(first(sample, add_special_tokens=False)["input_ids"]) == sample


def corpus(tmp_path: Path, pairs: int = 300) -> str:
    """Files of `pairs` numbered sentences: a source that train.seed does not change."""
    for lang, words in (("de", GERMAN), ("en", ENGLISH)):
        lines = [f"{words[i % len(words)]} {i}" for i in range(pairs)]
        (tmp_path / f"c.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return f"files:{tmp_path / 'c'}"


def test_the_bpe_learns_from_a_seeded_sample_kept_with_the_data(tmp_path: Path, capsys) -> None:
    """A sample of its own seed: every train.seed and run folder gets the same vocabulary
    from the data cache, learnt once; other vocabulary settings learn another."""
    from t2.data import stages
    from t2.data.tokenizer import SAMPLE_SEED, sample_rows

    cfg = DataConfig(train=corpus(tmp_path), vocab_size=300, tokenizer_sample=100)
    cfg = dataclasses.replace(cfg, cache_dir=str(tmp_path / "cache"))
    stages.begin()
    first = prepare_tokenizer(cfg, tmp_path / "a", seed=1, reuse=False)
    assert "on 100 pairs (a sample of the 300, data.tokenizer_sample)" in capsys.readouterr().out
    facts = {"sample_pairs": 100, "pairs": 300, "sample_seed": SAMPLE_SEED}
    assert stages.record()["tokenizer"] == facts  # what the run records in meta.json
    other_seed = prepare_tokenizer(cfg, tmp_path / "b", seed=2, reuse=False)
    assert "reusing the data cache's" in capsys.readouterr().out
    assert other_seed.backend_tokenizer.to_str() == first.backend_tokenizer.to_str()
    assert json.loads((tmp_path / "b" / "sample.json").read_text()) == facts
    everything = prepare_tokenizer(dataclasses.replace(cfg, tokenizer_sample=0), None, seed=1)
    assert "on 300 pairs\n" in capsys.readouterr().out
    assert everything.get_vocab() != first.get_vocab()
    rows = sample_rows(300, 100)
    assert len(set(rows)) == 100 and (np.diff(rows) > 0).all() and rows.max() < 300
    assert (sample_rows(300, 100) == rows).all() and sample_rows(300, 300) is None
