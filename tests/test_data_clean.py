"""Cleaning and filtering: each rule drops exactly what it reports, valid/test keep every pair."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from t2.config import DataConfig
from t2.data.clean import Repeats, Report, length_mask, normalise, normalise_array
from t2.data.encode import encode_pairs
from t2.data.pipeline import load_pairs
from t2.data.tokenizer import train_tokenizer
from t2.errors import DataError


def test_normalise_whitespace_and_unicode() -> None:
    assert normalise("  Die\tStraße \u00a0 ist\u2028naß \r") == "Die Straße ist naß"
    assert normalise("Gro\u0308\u00dfe") == "Größe"  # decomposed o + umlaut -> one character


def test_clean_drops_exactly_the_empty_and_duplicate_pairs(tmp_path: Path, capsys) -> None:
    src = ["a  b", "", "c", "a b", " ", "d", "c", "e"]
    tgt = ["A", "X", "", "A", "Y", "D", "C", "E"]
    spec = write_files(tmp_path / "x", src, tgt)
    cfg = DataConfig(train=spec, src_lang="src", tgt_lang="tgt", cache_dir=str(tmp_path))
    ds = load_pairs(replace(cfg, dedup=True), "train", 1)
    assert list(zip(ds["src"], ds["tgt"], strict=True)) == [
        ("a b", "A"),
        ("d", "D"),
        ("c", "C"),
        ("e", "E"),
    ]
    assert "8 pairs read; dropped 3 empty, 1 duplicate; kept 4" in capsys.readouterr().out
    assert len(load_pairs(cfg, "train", 1)) == 5
    assert "data train: 8 pairs read; dropped 3 empty; kept 5" in capsys.readouterr().out


def test_normalise_array_is_normalise_on_each_string() -> None:
    """Only the strings that may change go through Python: the others must not change."""
    rng = random.Random(5)
    pieces = ["a", "ß", " ", "  ", "\t", "\r", "\x1c", "\x85", "\xa0", "\u2028", "\u3000"]
    pieces += ["u\u0308", "e\u0301", "\u200b", "\ufeff", "x"]
    texts = ["".join(rng.choices(pieces, k=rng.randint(0, 9))) for _ in range(400)]
    strings = pa.array([*texts, "tail"]).slice(0, len(texts))  # an offset into its buffers
    assert normalise_array(strings).to_pylist() == [normalise(t) for t in texts]
    assert normalise_array(pa.array(["a", None])).to_pylist() == ["a", ""]


def test_repeats_are_found_across_chunks() -> None:
    repeats = Repeats()
    repeats.add(["a", "b", "a"], ["x", "y", "x"])
    repeats.add(["c", "a", "b"], ["x", "x", "z"])
    assert repeats.repeats().tolist() == [False, False, True, False, True, False]


def test_length_mask_counts_each_rule_once() -> None:
    src = np.array([3, 70, 10, 2, 64, 1])
    tgt = np.array([3, 5, 40, 7, 64, 3])
    report = Report("train", 6)
    keep = length_mask(src, tgt, 64, 3.0, report)
    # 70 is too long (its ratio is not counted again); 10/40 and 2/7 are beyond ratio 3.
    assert keep.tolist() == [True, False, False, False, True, True]
    assert report.dropped == {"longer than 64 tokens": 1, "length ratio above 3": 2}


@pytest.fixture(scope="module")
def word_tokenizer(tmp_path_factory: pytest.TempPathFactory):
    lines = [text(n) for n in range(1, 27)]  # every word becomes one token
    return train_tokenizer(lines * 3, 200, 1, False, tmp_path_factory.mktemp("tok") / "tok")


def text(n: int) -> str:
    """n distinct words: "aa bb cc ..." (letters only, so byte-level BPE never splits them)."""
    return " ".join(chr(97 + i) * 2 for i in range(n))


def write_files(prefix: Path, src: list[str], tgt: list[str]) -> str:
    Path(f"{prefix}.src").write_text("\n".join(src) + "\n")
    Path(f"{prefix}.tgt").write_text("\n".join(tgt) + "\n")
    return f"files:{prefix}"


def test_encode_drops_long_and_off_ratio_pairs_on_train_only(
    tmp_path: Path, word_tokenizer
) -> None:
    lengths = [(3, 3), (12, 2), (9, 9), (2, 7), (10, 10), (1, 1)]  # in words, that is tokens
    spec = write_files(tmp_path / "x", [text(a) for a, _ in lengths], [text(b) for _, b in lengths])
    cfg = DataConfig(
        train=spec,
        valid=spec,
        src_lang="src",
        tgt_lang="tgt",
        cache_dir=str(tmp_path),
        max_tokens_per_sentence=9,
    )
    for split, expected in (("train", [(3, 3), (9, 9), (1, 1)]), ("valid", lengths)):
        ds = encode_pairs(load_pairs(cfg, split, 1), word_tokenizer, cfg, split)
        kept = zip(ds["src"], ds["tgt"], strict=True)
        assert [(len(s.split()), len(t.split())) for s, t in kept] == expected
        assert list(ds["src_len"]) == [len(x) for x in ds["src_ids"]]


def test_encode_reports_what_it_drops(tmp_path: Path, word_tokenizer, capsys) -> None:
    spec = write_files(tmp_path / "x", [text(3), text(1), text(1)], [text(1), text(5), text(1)])
    cfg = DataConfig(
        train=spec,
        src_lang="src",
        tgt_lang="tgt",
        cache_dir=str(tmp_path),
        max_tokens_per_sentence=4,
        max_length_ratio=3.0,
    )
    assert len(encode_pairs(load_pairs(cfg, "train", 1), word_tokenizer, cfg, "train")) == 2
    assert (
        "dropped 1 longer than 4 tokens, 0 length ratio above 3; kept 2" in capsys.readouterr().out
    )
    spec = write_files(tmp_path / "y", [text(2), text(3)], [text(2), text(2)])
    cfg = DataConfig(
        train=spec,
        src_lang="src",
        tgt_lang="tgt",
        cache_dir=str(tmp_path),
        max_tokens_per_sentence=1,
        max_length_ratio=3.0,
    )
    with pytest.raises(DataError, match="raise them"):
        encode_pairs(load_pairs(cfg, "train", 1), word_tokenizer, cfg, "train")


def test_pairs_left_empty_after_cleaning_is_an_error(tmp_path: Path) -> None:
    spec = write_files(tmp_path / "x", ["a", ""], ["", "b"])
    cfg = DataConfig(train=spec, src_lang="src", tgt_lang="tgt", cache_dir=str(tmp_path))
    with pytest.raises(DataError, match="no pairs left after cleaning"):
        load_pairs(cfg, "train", 1)


def test_dedup_and_max_train_pairs_are_reported(tmp_path: Path, capsys) -> None:
    spec = write_files(tmp_path / "x", ["a", "a", "b", "c", "d"], ["A", "A", "B", "C", "D"])
    cfg = DataConfig(
        train=spec,
        valid=spec,
        src_lang="src",
        tgt_lang="tgt",
        cache_dir=str(tmp_path),
        dedup=True,
        max_train_pairs=2,
    )
    assert list(load_pairs(cfg, "train", 1)["src"]) == ["a", "b"]
    assert list(load_pairs(cfg, "valid", 1)["src"]) == ["a", "b", "c", "d"]  # train-only limit
    out = capsys.readouterr().out
    assert "5 pairs read; dropped 0 empty, 1 duplicate, 2 beyond max_train_pairs=2; kept 2" in out
