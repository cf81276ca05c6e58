"""Sources: local parallel files, Hugging Face datasets built locally, and their clear errors."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import datasets
import pyarrow as pa
import pytest

from t2.config import DataConfig
from t2.data.sources import open_source
from t2.errors import ConfigError, DataError

DE = ["Die Straße ist naß.", "Größer als 5 „Äpfel“!", "Er sagt: \u201eJa\u201c."]
EN = ["The street is wet.", 'Bigger than 5 "apples"!', "He says: 'yes'."]


def cfg(**kw) -> DataConfig:
    return DataConfig(**{"src_lang": "de", "tgt_lang": "en", **kw})


def write_pair(prefix: Path, de: list[str] | bytes, en: list[str] | bytes) -> str:
    for lang, lines in (("de", de), ("en", en)):
        data = lines if isinstance(lines, bytes) else "".join(f"{x}\n" for x in lines).encode()
        Path(f"{prefix}.{lang}").write_bytes(data)
    return f"files:{prefix}"


def read_source(c: DataConfig, split: str, seed: int) -> pa.Table:
    """Every raw pair of a split, its count checked first (as cleaning does)."""
    source = open_source(c, split, seed)
    table = source.table()
    assert source.count() == len(table)
    return table


def pairs(table: pa.Table) -> list[tuple[str, str]]:
    return list(zip(table["src"].to_pylist(), table["tgt"].to_pylist(), strict=True))


def test_files_source_yields_aligned_pairs_in_both_directions(tmp_path: Path) -> None:
    spec = write_pair(tmp_path / "train", DE, EN)
    assert pairs(read_source(cfg(train=spec), "train", 1)) == list(zip(DE, EN, strict=True))
    en_de = read_source(cfg(train=spec, src_lang="en", tgt_lang="de"), "train", 1)
    assert pairs(en_de) == list(zip(EN, DE, strict=True))


def test_files_split_on_newline_only_and_accept_crlf(tmp_path: Path) -> None:
    # U+2028 is a line break to str.splitlines; splitting on it would misalign the files.
    spec = write_pair(tmp_path / "x", b"a\xe2\x80\xa8b\r\nc\r\n", b"A B\nC")
    assert pairs(read_source(cfg(train=spec), "train", 1)) == [("a\u2028b", "A B"), ("c", "C")]


def test_missing_file_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "x.de").write_text("a\n")
    with pytest.raises(DataError, match=r"x\.en: file not found; check the files:PREFIX"):
        read_source(cfg(valid=f"files:{tmp_path / 'x'}"), "valid", 1)


def test_misaligned_files_name_both_counts(tmp_path: Path) -> None:
    spec = write_pair(tmp_path / "x", DE, EN[:2])
    with pytest.raises(DataError, match=r"x\.de has 3 lines but .*x\.en has 2; .*line-aligned"):
        read_source(cfg(train=spec), "train", 1)


def test_non_utf8_names_file_and_line(tmp_path: Path) -> None:
    spec = write_pair(tmp_path / "x", "eins\nzwei\nGr\xf6\xdfe\n".encode("latin-1"), b"1\n2\n3\n")
    with pytest.raises(DataError, match=r"x\.de:3: not valid UTF-8 \(byte 0xf6\); convert"):
        read_source(cfg(train=spec), "train", 1)


def test_empty_file_is_an_error(tmp_path: Path) -> None:
    spec = write_pair(tmp_path / "x", b"\n\n", b"\n\n")
    with pytest.raises(DataError, match=r"x\.de: file is empty"):
        read_source(cfg(train=spec), "train", 1)


def test_error_messages_are_one_line(tmp_path: Path) -> None:
    spec = write_pair(tmp_path / "x", b"\xff\n", b"a\n")
    with pytest.raises(DataError) as err:
        read_source(cfg(train=spec), "train", 1)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("spec", ["wmt14", "file:x", "task:", "hf:"])
def test_bad_source_forms_list_the_valid_ones(spec: str) -> None:
    with pytest.raises(ConfigError, match="valid forms: hf:NAME/CONFIG, files:PREFIX, task:NAME"):
        read_source(cfg(train=spec), "train", 1)


def test_unknown_task_and_split_list_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match="unknown task 'dates'; valid tasks: copy, fake_dates"):
        read_source(cfg(train="task:dates"), "train", 1)
    with pytest.raises(ConfigError, match="valid splits: train, valid, test"):
        read_source(cfg(), "dev", 1)


def test_task_source_sizes_follow_the_config() -> None:
    c = cfg(train="task:sum", valid="task:sum", task_train_size=50, task_eval_size=7)
    assert len(read_source(c, "train", 1)) == 50 and len(read_source(c, "valid", 1)) == 7


def translation_dataset(n: int, offset: int = 0) -> datasets.Dataset:
    features = datasets.Features({"translation": datasets.Translation(languages=["de", "en"])})
    rows = [
        {"de": f"{DE[i % 3]} {i + offset}", "en": f"{EN[i % 3]} {i + offset}"} for i in range(n)
    ]
    return datasets.Dataset.from_dict({"translation": rows}, features=features)


def test_hf_source_reads_a_saved_dataset_dict_with_split_names(tmp_path: Path) -> None:
    folder = tmp_path / "wmt_local"
    splits = {"train": translation_dataset(5), "validation": translation_dataset(2, 100)}
    datasets.DatasetDict(splits).save_to_disk(folder)
    c = cfg(train=f"hf:{folder}", valid=f"hf:{folder}", test=f"hf:{folder}")
    assert pairs(read_source(c, "train", 1))[0] == (f"{DE[0]} 0", f"{EN[0]} 0")
    valid = read_source(dataclasses.replace(c, src_lang="en", tgt_lang="de"), "valid", 1)
    assert pairs(valid) == [(f"{EN[0]} 100", f"{DE[0]} 100"), (f"{EN[1]} 101", f"{DE[1]} 101")]
    with pytest.raises(DataError, match="has no split 'test'; its splits: train, validation"):
        read_source(c, "test", 1)


def test_hf_source_reads_a_single_saved_dataset(tmp_path: Path) -> None:
    translation_dataset(4).save_to_disk(tmp_path / "one")
    assert len(read_source(cfg(train=f"hf:{tmp_path / 'one'}"), "train", 1)) == 4


def test_hf_source_builds_from_local_json_files_with_load_dataset(tmp_path: Path) -> None:
    folder = tmp_path / "json_ds"
    folder.mkdir()
    for split, n in (("train", 6), ("validation", 3), ("test", 2)):
        rows = [{"translation": {"de": f"{DE[i % 3]}", "en": f"{EN[i % 3]}"}} for i in range(n)]
        (folder / f"{split}.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    c = cfg(train=f"hf:{folder}", valid=f"hf:{folder}", test=f"hf:{folder}")
    assert [len(read_source(c, s, 1)) for s in ("train", "valid", "test")] == [6, 3, 2]
    assert pairs(read_source(c, "test", 1)) == list(zip(DE[:2], EN[:2], strict=True))


def test_hf_dataset_without_translation_column_or_language(tmp_path: Path) -> None:
    datasets.Dataset.from_dict({"text": ["a"]}).save_to_disk(tmp_path / "text")
    with pytest.raises(DataError, match=r"no 'translation' column \(columns: text\)"):
        read_source(cfg(train=f"hf:{tmp_path / 'text'}"), "train", 1)
    translation_dataset(2).save_to_disk(tmp_path / "de_en")
    with pytest.raises(DataError, match=r"no language 'fr' \(languages: de, en\); set data.src"):
        read_source(cfg(train=f"hf:{tmp_path / 'de_en'}", tgt_lang="fr"), "train", 1)


def test_unreachable_hub_fails_with_the_offline_alternatives(monkeypatch) -> None:
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    with pytest.raises(DataError) as err:
        read_source(cfg(test="hf:wmt14/de-en"), "test", 1)
    message = str(err.value)
    assert "could not load Hugging Face dataset 'wmt14/de-en' split 'test'" in message
    assert "files:PREFIX" in message and "save_to_disk" in message and "\n" not in message


def test_files_stream_in_blocks_as_one_whole_read(tmp_path: Path) -> None:
    """Blocks of any size (a CRLF or a UTF-8 character cut between two, a last line without
    its newline) give the lines a whole read gives, and count_lines counts them."""
    from t2.data.lines import count_lines, read_lines

    text = "Grüße\r\naus\u2028Köln\n\nzwei  Leer\r\n\r\n€ und ß\rx\nende"
    path = tmp_path / "x.de"
    path.write_bytes(text.encode())
    whole = [line.removesuffix("\r") for line in text.split("\n")]
    for block in range(1, 12):
        assert [s for a in read_lines(path, block) for s in a.to_pylist()] == whole
    assert count_lines(path) == len(whole) == 7
    path.write_bytes(b"a\nb\n" + "Größe\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"x\.de:3: not valid UTF-8 \(byte 0xf6\)"):
        list(read_lines(path, 2))
