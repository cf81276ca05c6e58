"""A data cache key is the content of what it caches: every field of DataConfig and every
source parameter moves the key of exactly the stages it changes (cleaned pairs of each
split, the tokenizer, the ids of each split), and nothing else.

The stages are run for real on tiny data, with the cache folders each stage looks up
recorded (t2.data.cache.load_folder); a field that is not classified below fails the walk,
so a new DataConfig field must say which stages it moves."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

import t2.data.cache
from t2.config import DataConfig
from t2.data.encode import encode_pairs, tokenizer_digest
from t2.data.pipeline import load_pairs
from t2.data.tokenizer import prepare_tokenizer

SPLITS = ("train", "valid", "test")
PAIRS = {f"pairs:{s}" for s in SPLITS}
IDS = {f"ids:{s}" for s in SPLITS}
ALL = PAIRS | {"tokenizer"} | IDS
TOKENIZER = {"tokenizer"} | IDS  # a new tokenizer gives new ids everywhere
NONE: set[str] = set()

EN = [f"the {w} house number {i} is red" for i, w in enumerate(["big", "small", "old", "new"])]
DE = [
    f"das {w} haus nummer {i} ist rot" for i, w in enumerate(["grosse", "kleine", "alte", "neue"])
]


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> tuple[DataConfig, Path]:
    """train: a generated task; valid: files; test: another task, all tiny (a byte-level
    BPE starts from 256 pieces: a vocabulary above that learns merges)."""
    root = tmp_path_factory.mktemp("keys")
    for lang, lines in (("de", DE), ("en", EN), ("fr", EN[::-1])):
        (root / f"valid.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    cfg = DataConfig(
        train="task:fake_dates",
        valid=f"files:{root / 'valid'}",
        test="task:reverse",
        task_train_size=200,
        task_eval_size=20,
        vocab_size=320,
        min_frequency=1,
        tokenizer_sample=0,
        cache_dir=str(root / "cache"),
    )
    return cfg, root


def keys(cfg: DataConfig, seed: int = 1, monkeypatch=None) -> dict[str, str]:
    """The cache folder (relative to the cache root) each stage looks up; for a tokenizer
    given by data.tokenizer, its digest."""
    seen: list[Path] = []
    real = t2.data.cache.load_folder

    def record(folder, load, stage):
        seen.append(Path(folder))
        return real(folder, load, stage)

    monkeypatch.setattr(t2.data.cache, "load_folder", record)
    for module in ("pipeline", "tokenizer", "encode"):
        monkeypatch.setattr(f"t2.data.{module}.load_folder", record)
    found: dict[str, str] = {}
    tokenizer = prepare_tokenizer(cfg, None, seed, reuse=False)
    if cfg.tokenizer:
        found["tokenizer"] = "given:" + tokenizer_digest(tokenizer)
    for split in SPLITS:
        start = len(seen)
        pairs = load_pairs(cfg, split, seed)
        found[f"pairs:{split}"] = seen[start].name
        start = len(seen)
        encode_pairs(pairs, tokenizer, cfg, split)
        found[f"ids:{split}"] = seen[start].name
    for folder in seen:
        if folder.parent.name == "tokenizers":
            found["tokenizer"] = folder.name
    return found


def moved(a: dict[str, str], b: dict[str, str]) -> set[str]:
    return {stage for stage in a if a[stage] != b[stage]}


def variants(root: Path, tokenizer_folder: Path) -> dict[str, tuple[dict, set[str]]]:
    """Every DataConfig field: a change of it, and the stages that change must move."""
    return {
        "train": ({"train": "task:polynomial"}, PAIRS - {"pairs:valid", "pairs:test"} | TOKENIZER),
        "valid": ({"valid": f"files:{root / 'other'}"}, {"pairs:valid", "ids:valid"}),
        "test": ({"test": "task:sum"}, {"pairs:test", "ids:test"}),
        "src_lang": ({"src_lang": "fr"}, ALL),
        "tgt_lang": ({"src_lang": "en", "tgt_lang": "de"}, ALL),
        "tokenizer": ({"tokenizer": str(tokenizer_folder)}, TOKENIZER),
        "vocab_size": ({"vocab_size": 300}, TOKENIZER),
        "min_frequency": ({"min_frequency": 40}, TOKENIZER),
        "tokenizer_sample": ({"tokenizer_sample": 20}, TOKENIZER),
        "split_digits": ({"split_digits": True}, TOKENIZER),
        "max_tokens_per_sentence": ({"max_tokens_per_sentence": 9}, NONE),  # applied on load
        "max_length_ratio": ({"max_length_ratio": 1.5}, NONE),  # applied on load
        "dedup": ({"dedup": True}, ALL),
        "src_bos": ({"src_bos": True}, IDS),
        "max_tokens": ({"max_tokens": 512}, NONE),
        "batch_size": ({"max_tokens": 0, "batch_size": 16}, NONE),
        "max_shapes": ({"max_shapes": 3}, NONE),
        "pad_multiple": ({"pad_multiple": 1}, NONE),
        "length_multiple": ({"length_multiple": 8}, NONE),
        "num_proc": ({"num_proc": 1}, NONE),
        "task_train_size": ({"task_train_size": 150}, {"pairs:train"} | TOKENIZER),
        "task_eval_size": ({"task_eval_size": 15}, {"pairs:test", "ids:test"}),  # valid: files
        "max_train_pairs": ({"max_train_pairs": 100}, {"pairs:train"} | TOKENIZER),
        # the whole cache elsewhere: the keys (folder names) stay
        "cache_dir": ({"cache_dir": str(root / "cache2")}, NONE),
    }


def test_every_field_moves_exactly_the_keys_of_the_stages_it_changes(base, monkeypatch, capsys):
    cfg, root = base
    (root / "other.de").write_text("\n".join(DE[::-1]) + "\n", encoding="utf-8")
    (root / "other.en").write_text("\n".join(EN[::-1]) + "\n", encoding="utf-8")
    given = root / "given-tokenizer"
    prepare_tokenizer(dataclasses.replace(cfg, vocab_size=310), given, 1, reuse=False)
    table = variants(root, given)
    fields = {f.name for f in dataclasses.fields(DataConfig)}
    assert fields == set(table), f"classify the stages these fields move: {fields ^ set(table)}"
    reference = keys(cfg, monkeypatch=monkeypatch)
    wrong = {}
    for field, (change, expected) in table.items():
        got = moved(reference, keys(dataclasses.replace(cfg, **change), monkeypatch=monkeypatch))
        if got != expected:
            wrong[field] = {"missing": sorted(expected - got), "extra": sorted(got - expected)}
    assert not wrong, wrong


def test_source_parameters_move_the_keys_of_their_splits(base, monkeypatch):
    """The seed (of generated tasks), a file's content (same size, same time: `cp -p`)."""
    cfg, root = base
    reference = keys(cfg, monkeypatch=monkeypatch)
    assert moved(reference, keys(cfg, seed=2, monkeypatch=monkeypatch)) == (
        {"pairs:train", "pairs:test"} | TOKENIZER
    )
    path = root / "valid.en"
    stat, text = path.stat(), path.read_text(encoding="utf-8")
    try:
        path.write_text(text.replace("red", "rot"), encoding="utf-8")  # the same size
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the same time
        assert path.stat().st_size == stat.st_size
        assert moved(reference, keys(cfg, monkeypatch=monkeypatch)) == {"pairs:valid", "ids:valid"}
        pairs = load_pairs(cfg, "valid", 1)
        assert "rot" in pairs[0]["tgt"]  # the corrected text, not the stale cache
    finally:
        path.write_text(text, encoding="utf-8")


def test_two_generated_tasks_with_one_seed_and_size_keep_their_own_pairs(base):
    """The sanity suite trains several tasks with one seed and size after one another."""
    cfg, _ = base
    copy = load_pairs(dataclasses.replace(cfg, test="task:copy"), "test", 1)
    reverse = load_pairs(cfg, "test", 1)
    for row in copy:
        assert row["src"] == row["tgt"]
    for row in reverse:
        assert row["tgt"].split() == row["src"].split()[::-1]


def test_a_hugging_face_source_is_keyed_by_its_fingerprint(tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")

    def save(words: list[str]) -> None:
        rows = [{"de": f"das {w}", "en": f"the {w}"} for w in words]
        data = datasets.Dataset.from_dict({"translation": rows})
        datasets.DatasetDict({"train": data, "validation": data, "test": data}).save_to_disk(
            str(tmp_path / "hf")
        )

    cfg = DataConfig(
        train=f"hf:{tmp_path / 'hf'}",
        valid=f"hf:{tmp_path / 'hf'}",
        test=f"hf:{tmp_path / 'hf'}",
        vocab_size=40,
        min_frequency=1,
        cache_dir=str(tmp_path / "cache"),
    )
    save(["haus", "baum"])
    first = load_pairs(cfg, "test", 1)
    save(["hund", "katze"])
    second = load_pairs(cfg, "test", 1)
    assert [r["tgt"] for r in first] != [r["tgt"] for r in second]
    assert second[0]["tgt"] == "the hund"


def test_a_generated_tasks_code_is_in_its_key(tmp_path, monkeypatch):
    """A changed generator (its own file) is another source; a partial or a callable
    object registers as well as a function (review of issue 52)."""
    import functools
    import importlib.util

    import t2.data.sources as sources

    code = (
        "OFFSET = {}\n"
        "def shift(rng, k=1):\n"
        "    return '1', str(1 + OFFSET)\n"
        "class Shift:\n"
        "    def __call__(self, rng):\n"
        "        return '1', str(OFFSET)\n"
    )
    path = tmp_path / "gen.py"

    def load(offset: int):
        path.write_text(code.format(offset), encoding="utf-8")
        spec = importlib.util.spec_from_file_location("gen", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    module = load(1)
    makers = {
        "function": module.shift,
        "partial": functools.partial(module.shift, k=2),
        "object": module.Shift(),
    }
    for kind, make in makers.items():
        monkeypatch.setattr(sources.TASKS, "get", lambda name, make=make: make)
        load(1)
        before = sources.task_code("anything")
        load(5)  # the generator's file, edited
        assert sources.task_code("anything") != before, kind


def test_a_source_changed_while_it_is_read_is_not_cached(base, monkeypatch, tmp_path):
    """The key is taken before the read: a file rewritten meanwhile would be cached under
    its old content's key; it is refused in one line instead (review of issue 52)."""
    import t2.data.pipeline as pipeline
    from t2.errors import DataError

    cfg, root = base
    (tmp_path / "x.de").write_text("\n".join(DE) + "\n", encoding="utf-8")
    (tmp_path / "x.en").write_text("\n".join(EN) + "\n", encoding="utf-8")
    cfg = dataclasses.replace(cfg, valid=f"files:{tmp_path / 'x'}", cache_dir=str(tmp_path / "c"))
    real, calls = pipeline.open_source, []

    def edited_meanwhile(*args):
        found = real(*args)
        if not calls:
            (tmp_path / "x.en").write_text("\n".join(EN[::-1]) + "\n", encoding="utf-8")
        calls.append(1)
        return found

    monkeypatch.setattr(pipeline, "open_source", edited_meanwhile)
    with pytest.raises(DataError, match="changed while it was read; nothing was cached"):
        load_pairs(cfg, "valid", 1)
    assert not any((tmp_path / "c" / "pairs").glob("[!.]*"))
