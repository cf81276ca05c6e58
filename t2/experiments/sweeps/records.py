"""A sweep's records kept apart from its weights (t2 sweep --records DIR): each finished
run's own files (t2.rundir's RECORDS: config, meta, metrics, results, test outputs and
the sweep's log of it; and any cached robustness scores), laid out as the sweep's own
folder (DIR/ARM/seed-S), with the report rendered from them. A few hundred kilobytes a
run: a folder to commit beside a study, or to carry from a scratch disk that a cluster
wipes. Given back, a finished run's records count as finished: the sweep copies them into
--out and trains only what is missing, so a study can go on across machines and sessions
(each run's meta.json names the machine it trained on, and the report says which)."""

from __future__ import annotations

import shutil
from pathlib import Path

from t2.atomic import atomic_folder
from t2.experiments.sweeps.robust import FILE as ROBUSTNESS
from t2.experiments.sweeps.sweepfile import Sweep
from t2.rundir import RunDir
from t2.rundir.layout import RECORDS

NAMES = (*RECORDS, ROBUSTNESS)


def _finished(path: Path) -> bool:
    return RunDir(path).results.is_file()


def copy_records(src: Path, dst: Path) -> None:
    """`src`'s record files into a new `dst` that replaces any old one whole (modification
    times kept: a cached robustness score stays newer than its results.json)."""
    with atomic_folder(dst) as tmp:
        for name in NAMES:
            if (found := RunDir(src).file(name)).is_file():
                shutil.copy2(found, RunDir(tmp).file(name))


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
