"""A split's references and their SHA-256: what a run's test translations are scored
against, named by content, not by path.

The references are the split's cleaned target sentences, a line each as a run directory
writes lines (t2.data.lines.one_line: a sentence's own line breaks become spaces),
and their SHA-256 is that of those lines, each ended by a newline: the SHA-256 of the
file an older run kept as RUN/test.refs.txt. A sweep's plan names each arm's test and
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

from t2.data.config import DataConfig
from t2.data.lines import one_line
from t2.data.pipeline import load_pairs
from t2.data.sources import open_source


def reference_lines(targets: Iterable[str]) -> list[str]:
    """Target sentences as a run directory writes them, a line each."""
    return [one_line(str(t)) for t in targets]


def lines_sha256(lines: Iterable[str]) -> str:
    """The SHA-256 (hex) of the lines, each ended by a newline."""
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode("utf-8") + b"\n")
    return digest.hexdigest()


def split_references(cfg: DataConfig, split: str, seed: int) -> tuple[str, ...]:
    """The references of `split` (its cleaned targets) from the source the config names,
    through the data cache; quiet (the data pipeline's lines are for training). Kept in
    memory under the source's identity (its content hash, fingerprint or task and seed:
    t2.data.sources), so a report that reads them for each of its tables reads them once,
    and an edited file is read again."""
    identity = json.dumps(open_source(cfg, split, seed).identity, default=str)
    return _read(cfg, split, seed, identity)


@functools.lru_cache(maxsize=64)
def _read(cfg: DataConfig, split: str, seed: int, identity: str) -> tuple[str, ...]:
    with contextlib.redirect_stdout(io.StringIO()):
        pairs = load_pairs(cfg, split, seed)
    return tuple(reference_lines(pairs["tgt"]))


def references_sha256(cfg: DataConfig, split: str, seed: int) -> str:
    return lines_sha256(split_references(cfg, split, seed))


def named_references(cfg: DataConfig, seed: int) -> dict[str, str]:
    """The SHA-256 of the test and validation references, as a run's meta.json names them."""
    return {split: references_sha256(cfg, split, seed) for split in ("test", "valid")}


def seeded(spec: str) -> bool:
    """Whether a split's source (data.test, data.valid) draws its pairs with the run's
    seed: a generated task does; files and Hub data sets do not."""
    return spec.startswith("task:")
