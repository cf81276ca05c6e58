"""Where pairs come from: `hf:NAME/CONFIG`, `files:PREFIX` or `task:NAME` (see docs/data.md).

Every source gives its pairs a chunk at a time as Arrow string arrays, raw text in the
direction data.src_lang -> data.tgt_lang, never all in memory at once (files are streamed,
Hugging Face datasets are memory-mapped). Bad input stops with a one-line DataError.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import datasets
import pyarrow as pa

from t2.data.config import DataConfig
from t2.data.lines import content_hash, count_lines, paired_lines
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


@dataclass(frozen=True)
class Source:
    """A split's raw pairs: what they are (the cache key's part: a task's name, seed, size
    and code; a file's content hash; a dataset's fingerprint), how many, and how to read
    them a chunk at a time as Arrow string arrays."""

    identity: tuple
    count: Callable[[], int]
    read: Callable[[int], Iterator[tuple[pa.Array, pa.Array]]]  # rows per chunk -> chunks

    def table(self) -> pa.Table:
        """Every pair at once (columns src, tgt): for small splits and tests."""
        chunks = list(self.read(1 << 16))
        return pa.table(
            {
                name: pa.concat_arrays([chunk[side] for chunk in chunks])
                for side, name in enumerate(("src", "tgt"))
            }
        )


def open_source(cfg: DataConfig, split: str, seed: int) -> Source:
    """The raw pairs of `split` from the source the recipe names."""
    if split not in SPLITS:
        raise ConfigError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")
    scheme, rest = parse_spec(getattr(cfg, split), f"data.{split}")
    if scheme == "task":
        size = cfg.task_train_size if split == "train" else cfg.task_eval_size
        return Source(
            ("task", rest, seed, size, task_code(rest)),
            lambda: size,
            functools.partial(_generated, rest, split, size, seed),
        )
    if scheme == "files":
        src, tgt = Path(f"{rest}.{cfg.src_lang}"), Path(f"{rest}.{cfg.tgt_lang}")
        return Source(
            ("files", [content_hash(path) for path in (src, tgt)]),
            functools.partial(_aligned_count, src, tgt),
            functools.partial(paired_lines, src, tgt),
        )
    ds = read_hf(rest, split, cfg.src_lang, cfg.tgt_lang)
    return Source(("hf", ds._fingerprint), lambda: len(ds), functools.partial(_slices, ds))


def task_code(name: str) -> str:
    """A hash of the file that generates task `name` (a plain function, a partial of one or a
    callable object; t2.data.tasks for the built-in ones, their helpers beside them): a
    changed generator is another source, whatever its name and seed. Code it imports from
    elsewhere is not hashed: a task keeps what changes its pairs in its own file."""
    make = TASKS.get(name)
    while isinstance(make, functools.partial):
        make = make.func
    if not inspect.isfunction(make) and not inspect.ismethod(make):
        make = type(make).__call__
    try:
        path = inspect.getsourcefile(make)
    except TypeError:
        path = None
    if not path:
        raise ConfigError(
            f"task:{name}: its generator's source file cannot be found (the data cache keys a "
            f"task by its code); register a function defined in a .py file"
        )
    return content_hash(Path(path))


def _aligned_count(src: Path, tgt: Path) -> int:
    """The pairs of two line-aligned files, or a DataError naming both counts."""
    counts = count_lines(src), count_lines(tgt)
    if counts[0] != counts[1]:
        raise DataError(
            f"{src} has {counts[0]} lines but {tgt} has {counts[1]}; the files must be "
            f"line-aligned (line i translates line i)"
        )
    return counts[0]


def _generated(
    name: str, split: str, size: int, seed: int, rows: int
) -> Iterator[tuple[pa.Array, pa.Array]]:
    src, tgt = generate(name, split, size, seed)
    for i in range(0, size, rows):
        yield pa.array(src[i : i + rows], pa.string()), pa.array(tgt[i : i + rows], pa.string())


def _slices(ds: datasets.Dataset, rows: int) -> Iterator[tuple[pa.Array, pa.Array]]:
    """A dataset's src and tgt (through its indices mapping), `rows` at a time."""
    for batch in ds.with_format("arrow").iter(batch_size=rows):
        yield batch["src"].combine_chunks(), batch["tgt"].combine_chunks()


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
