"""Where pairs come from: `hf:NAME/CONFIG`, `files:PREFIX` or `task:NAME` (see docs/data.md).

Every reader returns a `datasets.Dataset` with the columns "src" and "tgt", raw text in
the direction data.src_lang -> data.tgt_lang. Bad input stops with a one-line DataError.
"""

from __future__ import annotations

import os
from pathlib import Path

import datasets

from t2.data.config import DataConfig
from t2.data.tasks import TASKS, generate
from t2.errors import ConfigError, DataError

SPLITS = ("train", "valid", "test")
HF_SPLITS = {"train": "train", "valid": "validation", "test": "test"}
HF_SPLIT_ALIASES = {"validation": ("validation", "valid", "dev")}  # for local DatasetDicts
SCHEMES = "hf:NAME/CONFIG, files:PREFIX, task:NAME"


def parse_spec(spec: str, where: str) -> tuple[str, str]:
    """("hf" | "files" | "task", the rest) of a source spec, or a ConfigError."""
    scheme, sep, rest = spec.partition(":")
    if not sep or scheme not in ("hf", "files", "task") or not rest:
        raise ConfigError(f"{where}={spec!r} is not a data source; valid forms: {SCHEMES}")
    if scheme == "task" and rest not in TASKS:
        raise ConfigError(
            f"{where}: unknown task {rest!r}; valid tasks: {', '.join(TASKS.names())}"
        )
    return scheme, rest


def read_source(cfg: DataConfig, split: str, seed: int) -> datasets.Dataset:
    """The raw pairs of `split` (columns src, tgt) from the source the recipe names."""
    if split not in SPLITS:
        raise ConfigError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")
    scheme, rest = parse_spec(getattr(cfg, split), f"data.{split}")
    if scheme == "task":
        size = cfg.task_train_size if split == "train" else cfg.task_eval_size
        src, tgt = generate(rest, split, size, seed)
        return datasets.Dataset.from_dict({"src": src, "tgt": tgt})
    if scheme == "files":
        src = read_source_lines(Path(f"{rest}.{cfg.src_lang}"))
        tgt = read_source_lines(Path(f"{rest}.{cfg.tgt_lang}"))
        if len(src) != len(tgt):
            raise DataError(
                f"{rest}.{cfg.src_lang} has {len(src)} lines but {rest}.{cfg.tgt_lang} has "
                f"{len(tgt)}; the files must be line-aligned (line i translates line i)"
            )
        return datasets.Dataset.from_dict({"src": src, "tgt": tgt})
    return read_hf(rest, split, cfg.src_lang, cfg.tgt_lang)


def read_source_lines(path: Path) -> list[str]:
    """Lines of a UTF-8 text file, strictly decoded; splits on "\\n" only (not U+2028 etc.)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: file not found; check the files:PREFIX source") from None
    except OSError as err:
        raise DataError(f"{path}: cannot be read ({err.strerror}); check the path") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise DataError(
            f"{path}:{line}: not valid UTF-8 (byte 0x{raw[err.start]:02x}); convert the file "
            f"to UTF-8, e.g. iconv -f latin1 -t utf-8"
        ) from None
    if not text.strip():
        raise DataError(f"{path}: file is empty; point the source at a file with sentences")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def read_hf(target: str, split: str, src_lang: str, tgt_lang: str) -> datasets.Dataset:
    """A Hugging Face dataset with a `translation` column, from the hub or a local copy."""
    hf_split = HF_SPLITS[split]
    try:
        if Path(target).exists():
            ds = _read_local(Path(target), hf_split)
        else:
            name, _, config = target.rpartition("/")
            name, config = (name, config) if name else (target, None)
            ds = datasets.load_dataset(name, config, split=hf_split)
    except (OSError, ValueError, datasets.exceptions.DatasetNotFoundError) as err:
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        raise DataError(
            f"could not load Hugging Face dataset {target!r} split {hf_split!r} ({reason}); "
            f"offline, use files:PREFIX with local text files, a folder saved with "
            f"save_to_disk (hf:/path/to/folder), or a cached copy with HF_DATASETS_OFFLINE=1"
        ) from None
    return _translation_columns(ds, target, src_lang, tgt_lang)


def _read_local(path: Path, hf_split: str) -> datasets.Dataset:
    """A folder from `save_to_disk` (Dataset or DatasetDict), else data files for load_dataset."""
    if (path / "dataset_dict.json").is_file() or (path / "state.json").is_file():
        loaded = datasets.load_from_disk(os.fspath(path))
        if isinstance(loaded, datasets.Dataset):
            return loaded
        for name in HF_SPLIT_ALIASES.get(hf_split, (hf_split,)):
            if name in loaded:
                return loaded[name]
        raise DataError(
            f"{path} has no split {hf_split!r}; its splits: {', '.join(loaded)}; "
            f"save the split under that name"
        )
    return datasets.load_dataset(os.fspath(path), split=hf_split)


def _translation_columns(
    ds: datasets.Dataset, target: str, src_lang: str, tgt_lang: str
) -> datasets.Dataset:
    """Columns src, tgt from the `translation` column of {lang: text} dictionaries."""
    if "translation" not in ds.column_names:
        raise DataError(
            f"dataset {target!r} has no 'translation' column (columns: "
            f"{', '.join(ds.column_names)}); use a dataset of {{lang: text}} pairs"
        )
    feature = ds.features["translation"]
    langs = list(feature.languages if isinstance(feature, datasets.Translation) else feature)
    for lang in (src_lang, tgt_lang):
        if lang not in langs:
            raise DataError(
                f"dataset {target!r} has no language {lang!r} (languages: {', '.join(langs)}); "
                f"set data.src_lang and data.tgt_lang to two of them"
            )
    flat = ds.select_columns(["translation"]).flatten()
    return flat.select_columns(
        [f"translation.{src_lang}", f"translation.{tgt_lang}"]
    ).rename_columns({f"translation.{src_lang}": "src", f"translation.{tgt_lang}": "tgt"})
