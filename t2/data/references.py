"""A split's references and their SHA-256: what a run's test translations are scored
against, named by content, not by path.

The references are the split's cleaned target sentences, a line each as a run directory
writes lines (t2.data.lines.one_line: a sentence's own line breaks become spaces),
and their SHA-256 is that of those lines, each ended by a newline: the SHA-256 of the
file an older run kept as RUN/test.refs.txt (and of a clean target file such as
multi30k/val.en). The source side is named beside them (SPLIT_source), so a test set
whose source sentences were edited is another test set too. A sweep's plan names each arm's test and
validation references so (t2.experiments.decisions.plan; a generated task's at each
seed, since its sets are drawn with the seed), every run's meta.json too (`references`),
and a report reads a run's test references from its data.test and checks them against it
(t2.experiments.sweeps.runs, their one reader).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
from collections.abc import Iterable
from typing import Any

from t2.data.config import DataConfig
from t2.data.lines import one_line
from t2.data.pipeline import load_pairs
from t2.data.sources import open_source

SIDES = {"tgt": "", "src": "_source"}  # a side of the pairs -> its key's suffix


def reference_lines(targets: Iterable[str]) -> list[str]:
    """Sentences as a run directory writes them, a line each."""
    return [one_line(str(t)) for t in targets]


def lines_sha256(lines: Iterable[str]) -> str:
    """The SHA-256 (hex) of the lines, each ended by a newline."""
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode("utf-8") + b"\n")
    return digest.hexdigest()


def split_lines(cfg: DataConfig, split: str, seed: int) -> dict[str, tuple[str, ...]]:
    """The cleaned pairs of `split` from the source the config names, a line each per side
    ("src", "tgt"), through the data cache; quiet (the data pipeline's lines are for
    training). Kept in memory under the source's identity (its content hash, fingerprint
    or task and seed: t2.data.sources), so a report that reads them for each of its tables
    reads them once, and an edited file is read again."""
    identity = json.dumps(open_source(cfg, split, seed).identity, default=str)
    return _read(cfg, split, seed, identity)


@functools.lru_cache(maxsize=64)
def _read(cfg: DataConfig, split: str, seed: int, identity: str) -> dict[str, tuple[str, ...]]:
    with contextlib.redirect_stdout(io.StringIO()):
        pairs = load_pairs(cfg, split, seed)
    return {side: tuple(reference_lines(pairs[side])) for side in SIDES}


def split_references(cfg: DataConfig, split: str, seed: int) -> tuple[str, ...]:
    """The references of `split`: its cleaned targets, a line each."""
    return split_lines(cfg, split, seed)["tgt"]


def pairs_named(pairs: Any, split: str) -> dict[str, str]:
    """{split: SHA-256 of the references, split_source: of the source sentences} of pairs
    (columns src, tgt): what a run's meta.json names for the pairs it scored on."""
    return {
        split + suffix: lines_sha256(reference_lines(pairs[side])) for side, suffix in SIDES.items()
    }


def split_named(cfg: DataConfig, split: str, seed: int) -> dict[str, str]:
    """pairs_named of the split the config names, as read today."""
    found = split_lines(cfg, split, seed)
    return {split + suffix: lines_sha256(found[side]) for side, suffix in SIDES.items()}


def seeded(spec: str) -> bool:
    """Whether a split's source (data.test, data.valid) draws its pairs with the run's
    seed: a generated task does; files and Hub data sets do not."""
    return spec.startswith("task:")
