"""A sweep's records kept apart from its weights (t2 sweep --records DIR): each finished
run's own files (t2.rundir's RECORDS: config, meta, metrics, results, test outputs and
the sweep's log of it; and any cached robustness scores), laid out as the sweep's own
folder (DIR/ARM/seed-S), with the report rendered from them. A few hundred kilobytes a
run: a folder to commit beside a study, or to carry from a scratch disk that a cluster
wipes. Given back, a finished run's records count as finished: the sweep copies them into
--out and trains only what is missing, so a study can go on across machines and sessions
(each run's meta.json names the machine it trained on, and the report says which).

Records hold no copy of a shared test set: a run's meta.json names its references by
SHA-256, and a report reads them from data.test and checks them (t2.experiments.sweeps.runs).
A run from before t2 named them kept a copy (test.refs.txt); copied as records, it is
converted when its data.test holds the same sentences (meta.json names their SHA-256, the
copy is left behind), and carried as it is when not (the report reads the copy)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from t2.atomic import atomic_folder
from t2.data.references import lines_sha256
from t2.errors import ConfigError, DataError
from t2.experiments.sweeps.robust import FILE as ROBUSTNESS
from t2.experiments.sweeps.runs import read_run, test_references
from t2.experiments.sweeps.sweepfile import Sweep
from t2.rundir import RunDir, read_meta
from t2.rundir.layout import RECORDS, TEST_REFS, read_written_lines, write_json

NAMES = (*RECORDS, ROBUSTNESS)


def _finished(path: Path) -> bool:
    return RunDir(path).results.is_file()


def copy_records(src: Path, dst: Path) -> None:
    """`src`'s record files into a new `dst` that replaces any old one whole (modification
    times kept: a cached robustness score stays newer than its results.json)."""
    named = converted_meta(src)
    old = named is None and RunDir(src).test_refs.is_file()  # an older run: carry its copy
    with atomic_folder(dst) as tmp:
        for name in (*NAMES, TEST_REFS) if old else NAMES:
            if (found := RunDir(src).file(name)).is_file():
                shutil.copy2(found, RunDir(tmp).file(name))
        if named is not None:
            write_json(RunDir(tmp).meta, named)


def converted_meta(src: Path) -> dict[str, Any] | None:
    """An older run's meta.json naming its test references by SHA-256, when the copy it
    kept (test.refs.txt) holds the sentences its data.test holds today (and its valid
    references too where data.valid is the same source); None for a run that names them
    already, keeps no copy, or whose data.test is not here or holds other sentences."""
    run = RunDir(src)
    meta = read_meta(run.path)
    if "references" in meta or not run.test_refs.is_file():
        return None
    digest = lines_sha256(read_written_lines(run.test_refs))
    config = read_run(run.path).config
    try:
        test_references(run.path, config, {"test": digest})
    except (DataError, ConfigError):  # not here, or other sentences: the copy stays
        return None
    named = {"test": digest}
    if config.get("data.valid") == config.get("data.test"):
        named["valid"] = digest
    return {**meta, "references": named}


def restore(sweep: Sweep, out: Path, records: Path) -> int:
    """Copy every run finished in `records` but not in `out` into `out` (an unfinished
    folder there is replaced: the run was finished elsewhere); the number copied."""
    copied = 0
    for arm in sweep.arms:
        for seed in sweep.seeds:
            kept, run = sweep.run_dir(records, arm, seed), sweep.run_dir(out, arm, seed)
            if _finished(kept) and not _finished(run):
                copy_records(kept, run)
                copied += 1
    return copied


def keep(sweep: Sweep, out: Path, records: Path) -> int:
    """Copy every run finished in `out` into `records`; the number kept."""
    kept = 0
    for arm in sweep.arms:
        for seed in sweep.seeds:
            run = sweep.run_dir(out, arm, seed)
            if _finished(run):
                copy_records(run, sweep.run_dir(records, arm, seed))
                kept += 1
    return kept
