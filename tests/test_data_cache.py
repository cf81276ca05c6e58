"""A damaged data cache is set aside and rebuilt, not fatal: cleaned pairs and tokenized
ids alike, whether the damage fails to load (a truncated .arrow file) or loads without an
error (a changed byte, caught by the checksum written with each file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from t2.config import DataConfig
from t2.data.encode import encode_pairs
from t2.data.pipeline import cache_root, load_pairs
from t2.data.tokenizer import prepare_tokenizer


def task_cfg(tmp_path: Path) -> DataConfig:
    return DataConfig(
        task_train_size=300, task_eval_size=50, vocab_size=120, cache_dir=str(tmp_path / "cache")
    )


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def flip(path: Path) -> None:
    """Change one byte in the middle: the same size, and the file still loads."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def build(cfg: DataConfig, tmp_path: Path) -> dict:
    """Pairs, tokenizer and ids of the train split, through the caches."""
    tokenizer = prepare_tokenizer(cfg, tmp_path / "run-tokenizer", 1, reuse=False)
    ids = encode_pairs(load_pairs(cfg, "train", 1), tokenizer, cfg, "train")
    return {"ids": ids.to_dict(), "vocab": tokenizer.get_vocab()}


# what each cache folder holds: cleaned pairs, the BPE learnt from them, token ids
CACHED = {"pairs": "pairs.arrow", "tokenizers": "tokenizer.json", "ids": "ids.arrow"}


@pytest.mark.parametrize("damage", [truncate, flip])
@pytest.mark.parametrize("kind", sorted(CACHED))
def test_a_damaged_cache_is_set_aside_and_rebuilt(tmp_path, capsys, kind, damage):
    cfg = task_cfg(tmp_path)
    first = build(cfg, tmp_path)
    (cached,) = (cache_root(cfg) / kind).glob(f"*/{CACHED[kind]}")
    damage(cached)
    capsys.readouterr()
    assert build(cfg, tmp_path) == first
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if "is damaged" in line]
    assert len(lines) == 1 and "set aside as .damaged-" in lines[0] and "rebuilding" in lines[0]
    (aside,) = (cache_root(cfg) / kind).glob(".damaged-*")
    assert (aside / CACHED[kind]).is_file()  # renamed, not deleted
    build(cfg, tmp_path)  # the rebuilt cache reads back quietly
    assert "is damaged" not in capsys.readouterr().out
