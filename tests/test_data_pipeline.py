"""End to end: recipe -> pairs -> ids -> batches, with caches reused and real de-en data."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

import datasets
import numpy as np
import pytest

from t2.config import DataConfig
from t2.data import stages
from t2.data.batching import BatchSampler
from t2.data.encode import encode_pairs, encode_source
from t2.data.loader import make_loader
from t2.data.pipeline import column, load_pairs, take_rows
from t2.data.tokenizer import prepare_tokenizer
from t2.recipes import load_config

SHARED = Path(
    os.environ.get("T2_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)
needs_shared = pytest.mark.skipif(
    not (SHARED / "multi30k" / "train.de").is_file(),
    reason=f"shared de-en data not found at {SHARED} (set T2_SHARED_DATA)",
)


def task_cfg(tmp_path: Path, **kw) -> DataConfig:
    args = {"task_train_size": 400, "task_eval_size": 50, "vocab_size": 120}
    return DataConfig(**{**args, "cache_dir": str(tmp_path / "cache"), **kw})


def test_quickstart_data_section_runs_end_to_end(tmp_path: Path) -> None:
    cfg = load_config("quickstart", ["data.task_train_size=300", "data.task_eval_size=40"]).data
    cfg = replace(cfg, cache_dir=str(tmp_path))
    tok = prepare_tokenizer(cfg, tmp_path / "run" / "tokenizer", seed=1)
    train = encode_pairs(load_pairs(cfg, "train", 1), tok, cfg, "train")
    valid = encode_pairs(load_pairs(cfg, "valid", 1), tok, cfg, "valid")
    assert len(valid) == 40 and not set(valid["src"]) & set(train["src"])
    sampler = BatchSampler(train["src_len"], train["tgt_len"], cfg.max_tokens, 0, 1, True)
    batches = list(make_loader(train, sampler, tok.pad_token_id))
    assert sum(b["src"].shape[0] for b in batches) == len(train)
    first = batches[0]
    assert (first["tgt_in"][:, 0] == tok.bos_token_id).all()
    rows = (first["tgt_out"] == tok.eos_token_id).sum(1)
    assert rows.tolist() == [1] * len(rows)  # one EOS per target row


def test_ids_carry_bos_and_eos_as_specified(tmp_path: Path) -> None:
    cfg = task_cfg(tmp_path, train="task:copy")
    tok = prepare_tokenizer(cfg, None, seed=1)
    plain = encode_pairs(load_pairs(cfg, "train", 1), tok, cfg, "train")
    row = plain[0]
    body = tok(row["src"], add_special_tokens=False)["input_ids"]
    assert row["src_ids"] == [*body, 2] and row["tgt_ids"] == [1, *body, 2]  # copy: same text
    bos_cfg = task_cfg(tmp_path, train="task:copy", src_bos=True)
    with_bos = encode_pairs(load_pairs(bos_cfg, "train", 1), tok, bos_cfg, "train")
    assert with_bos[0]["src_ids"] == [1, *body, 2] and with_bos[0]["tgt_ids"] == row["tgt_ids"]
    assert encode_source(tok, [row["src"]], src_bos=False) == [row["src_ids"]]


def test_second_run_reuses_cleaned_and_tokenized_data(tmp_path: Path, capsys) -> None:
    cfg = task_cfg(tmp_path)
    tok = prepare_tokenizer(cfg, None, seed=1)
    first = encode_pairs(load_pairs(cfg, "valid", 1), tok, cfg, "valid")
    capsys.readouterr()
    pairs = load_pairs(cfg, "valid", 1)
    assert "(cached in" in capsys.readouterr().out
    second = encode_pairs(pairs, tok, cfg, "valid")
    assert second.cache_files == first.cache_files  # datasets.map found its cache file
    assert second["src_ids"] == first["src_ids"]
    other = encode_pairs(pairs, tok, replace(cfg, src_bos=True), "valid")
    assert other.cache_files != first.cache_files  # a different encoding is not confused


def test_num_proc_gives_the_same_ids(tmp_path: Path) -> None:
    cfg = task_cfg(tmp_path, train="task:polynomial")
    tok = prepare_tokenizer(cfg, None, seed=1)
    one = encode_pairs(load_pairs(cfg, "train", 1), tok, cfg, "train")
    two_cfg = replace(cfg, num_proc=2, cache_dir=str(tmp_path / "c2"))
    two = encode_pairs(load_pairs(two_cfg, "train", 1), tok, two_cfg, "train")
    assert one["src_ids"] == two["src_ids"] and one["tgt_ids"] == two["tgt_ids"]


def test_seeds_change_generated_data(tmp_path: Path) -> None:
    cfg = task_cfg(tmp_path)
    assert load_pairs(cfg, "train", 1)["src"] != load_pairs(cfg, "train", 2)["src"]


@needs_shared
def test_multi30k_files_round_trip_and_batch(tmp_path: Path) -> None:
    prefix = SHARED / "multi30k"
    cfg = DataConfig(
        train=f"files:{prefix}/train",
        valid=f"files:{prefix}/val",
        vocab_size=2000,
        max_train_pairs=2000,
        cache_dir=str(tmp_path),
    )
    tok = prepare_tokenizer(cfg, None, seed=1)
    valid = load_pairs(cfg, "valid", 1)
    assert len(valid) == 1014  # every validation pair is kept
    first_de = (prefix / "val.de").read_text(encoding="utf-8").split("\n")[0]
    assert valid[0]["src"] == " ".join(first_de.split())
    for text in valid["src"][:200] + valid["tgt"][:200]:
        assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text
    train = encode_pairs(load_pairs(cfg, "train", 1), tok, cfg, "train")
    assert 1900 < len(train) <= 2000
    sampler = BatchSampler(train["src_len"], train["tgt_len"], 1024, 0, 1, True)
    for batch in make_loader(train, sampler, 0):
        assert (
            batch["src"].shape[0] * max(batch["src"].shape[1], batch["tgt_in"].shape[1] + 1) <= 1024
        )


@needs_shared
def test_newstest_en_de_direction(tmp_path: Path) -> None:
    cfg = DataConfig(
        test=f"files:{SHARED}/newstest/newstest2013",
        src_lang="en",
        tgt_lang="de",
        cache_dir=str(tmp_path),
    )
    test = load_pairs(cfg, "test", 1)
    assert len(test) == 3000
    de = (SHARED / "newstest" / "newstest2013.de").read_text(encoding="utf-8").split("\n")
    assert test[5]["tgt"] == " ".join(de[5].split())


def test_hf_local_dataset_through_load_pairs_is_cleaned_and_cached(tmp_path: Path, capsys) -> None:
    rows = [{"de": " Grüße  aus Köln ", "en": "Greetings from Cologne"}, {"de": "", "en": "x"}]
    features = datasets.Features({"translation": datasets.Translation(languages=["de", "en"])})
    ds = datasets.Dataset.from_dict({"translation": rows}, features=features)
    datasets.DatasetDict({"validation": ds}).save_to_disk(tmp_path / "local")
    cfg = DataConfig(valid=f"hf:{tmp_path / 'local'}", cache_dir=str(tmp_path / "cache"))
    pairs = load_pairs(cfg, "valid", 1)
    assert list(zip(pairs["src"], pairs["tgt"], strict=True)) == [
        ("Grüße aus Köln", "Greetings from Cologne")
    ]
    assert "2 pairs read; dropped 1 empty; kept 1" in capsys.readouterr().out
    assert load_pairs(cfg, "valid", 1)["src"] == pairs["src"]
    assert "(cached in" in capsys.readouterr().out


def test_every_stage_shows_progress_in_a_log_and_records_its_seconds(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    """Reading and cleaning, the tokenizer's texts, encoding: lines in a log file (here one
    at each update); work that counts nothing (the merges, planning) beats while it runs."""
    monkeypatch.setenv("T2_PROGRESS_EVERY", "0")
    monkeypatch.setattr(stages, "BEAT_AT_LEAST_S", 0.05)
    stages.begin()
    cfg = task_cfg(tmp_path)
    tok = prepare_tokenizer(cfg, None, seed=1)
    encode_pairs(load_pairs(cfg, "train", 1), tok, cfg, "train")
    with stages.Heartbeat("data train: plan the batches"):
        time.sleep(0.2)
    err = capsys.readouterr().err
    for done in (
        "data train: read and clean: 400/400 pairs in ",
        "tokenizer: reading: 800/800 ",
        "data train: encode: 400/400 pairs in ",
    ):
        assert done in err
    assert "tokenizer: computing the merges" in err and "plan the batches: 0 s so far" in err
    seconds = stages.record()["stages_s"]
    assert set(seconds) == {
        "data train: read and clean",
        "data train: check the cache",  # the pairs again, once the tokenizer read them
        "tokenizer: reading",
        "tokenizer: computing the merges",
        "data train: encode",
        "data train: plan the batches",
    }
    assert seconds["data train: plan the batches"] >= 0.2


def test_columns_come_from_arrow_through_a_selection(tmp_path: Path) -> None:
    cfg = task_cfg(tmp_path)
    ds = encode_pairs(load_pairs(cfg, "train", 1), prepare_tokenizer(cfg, None, 1), cfg, "train")
    chosen = ds.select([5, 1, 3])
    assert column(chosen, "src_len").tolist() == [len(x) for x in chosen["src_ids"]]
    rows = np.array([0, 2, 3, 7])
    assert take_rows(ds, rows).to_dict() == ds.select(rows).to_dict()
    assert take_rows(chosen, np.array([2, 0])).to_dict() == chosen.select([2, 0]).to_dict()
    assert column(ds, "tgt_len").tolist() == [len(x) for x in ds["tgt_ids"]]
