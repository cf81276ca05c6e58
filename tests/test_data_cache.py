"""A damaged data cache is set aside and rebuilt, not fatal: cleaned pairs and tokenized
ids alike, whether the damage fails to load (a truncated .arrow file) or loads without an
error (a changed byte, caught by the checksum written with each file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from t2.config import DataConfig
from t2.data.pipeline import cache_root, encode_pairs, load_pairs
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


def pairs_files(cfg: DataConfig) -> list[Path]:
    return sorted((cache_root(cfg) / "pairs").glob("*/pairs/data-*.arrow"))


@pytest.mark.parametrize("damage", [truncate, flip])
def test_a_damaged_pairs_cache_is_set_aside_and_rebuilt(tmp_path, capsys, damage):
    cfg = task_cfg(tmp_path)
    first = load_pairs(cfg, "train", 1).to_dict()
    (arrow,) = pairs_files(cfg)
    damage(arrow)
    capsys.readouterr()
    again = load_pairs(cfg, "train", 1)
    assert again.to_dict() == first
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if "is damaged" in line]
    assert len(lines) == 1 and "set aside as .damaged-" in lines[0] and "rebuilding" in lines[0]
    aside = list((cache_root(cfg) / "pairs").glob(".damaged-*"))
    assert len(aside) == 1 and (aside[0] / "pairs").is_dir()  # renamed, not deleted
    capsys.readouterr()
    load_pairs(cfg, "train", 1)  # the rebuilt cache reads back quietly
    assert "is damaged" not in capsys.readouterr().out


@pytest.mark.parametrize("damage", [truncate, flip])
def test_a_damaged_tokenized_cache_is_set_aside_and_rebuilt(tmp_path, capsys, damage):
    cfg = task_cfg(tmp_path)
    tokenizer = prepare_tokenizer(cfg, tmp_path / "tok", 1, reuse=False)
    pairs = load_pairs(cfg, "train", 1)
    first = encode_pairs(pairs, tokenizer, cfg, "train").to_dict()
    folder = pairs_files(cfg)[0].parent
    (cached,) = sorted(folder.glob("cache-*.arrow"))
    assert (folder / f"{cached.name}.sha256").is_file()
    damage(cached)
    capsys.readouterr()
    again = encode_pairs(load_pairs(cfg, "train", 1), tokenizer, cfg, "train")
    assert again.to_dict() == first
    lines = [line for line in capsys.readouterr().out.splitlines() if "is damaged" in line]
    assert len(lines) == 1 and cached.name in lines[0] and "set aside" in lines[0]
    assert len(list(folder.glob(f".damaged-{cached.name}-*"))) == 1
    capsys.readouterr()
    encode_pairs(load_pairs(cfg, "train", 1), tokenizer, cfg, "train")
    assert "is damaged" not in capsys.readouterr().out
