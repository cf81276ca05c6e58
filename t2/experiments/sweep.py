"""Run a sweep: every arm x seed without a finished run, one `t2 train` process each.

A run is finished when its results.json exists; any other is started with --resume, so a
run cut off (Ctrl-C, a killed machine) continues from its newest checkpoint and the
sweep as a whole continues where it stopped. A finished run whose config no longer
matches the sweep file stops the sweep (one line naming the keys), so a report never
mixes two settings under one arm name. Each run's output goes to OUT/ARM/seed-S/sweep.log.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from t2.errors import ConfigError, T2Error
from t2.experiments.compare import duration
from t2.experiments.runs import flatten, read_run
from t2.experiments.sweepfile import Arm, Sweep
from t2.recipes import load_config
from t2.rundir import RunDir

LOG = "sweep.log"  # in the run directory: the output of its `t2 train` process(es)
DERIVED = frozenset({"model.vocab_size"})  # set from the tokenizer when a run starts


def status(run_dir: Path) -> str:
    """finished (results.json), partial (checkpoints to resume) or new."""
    run = RunDir(run_dir)
    if run.results.is_file():
        return "finished"
    return "partial" if run.latest() is not None else "new"


def check_finished(sweep: Sweep, arm: Arm, seed: int, run_dir: Path) -> None:
    """A finished run must have been trained with what the sweep file says now."""
    want = flatten(load_config(arm.recipe, sweep.overrides(arm, seed)).to_dict())
    have = read_run(run_dir).config
    changed = [k for k in want if k in have and k not in DERIVED and have[k] != want[k]]
    if changed:
        shown = ", ".join(f"{k}={have[k]!r} (sweep file: {want[k]!r})" for k in changed[:4])
        raise ConfigError(
            f"{run_dir} was trained with {shown}; restore the sweep file, or remove the "
            f"folder to retrain it, or pass another --out"
        )


def plan(sweep: Sweep, out: Path) -> list[tuple[Arm, int, str]]:
    """Every run of the sweep with its status; finished runs checked against the file."""
    runs = []
    for arm in sweep.arms:
        for seed in sweep.seeds:
            state = status(sweep.run_dir(out, arm, seed))
            if state == "finished":
                check_finished(sweep, arm, seed, sweep.run_dir(out, arm, seed))
            runs.append((arm, seed, state))
    return runs


def _last_error(log: Path) -> str:
    lines = [x.strip() for x in log.read_text(encoding="utf-8", errors="replace").splitlines()]
    errors = [x for x in lines if x.startswith("error:")]
    return (errors or [x for x in lines if x] or ["no output"])[-1]


def train_one(sweep: Sweep, arm: Arm, seed: int, out: Path, wandb: str) -> None:
    """One run as a child process (`python -m t2 train ...`), its output in a log file."""
    run_dir = sweep.run_dir(out, arm, seed)
    run_dir.mkdir(parents=True, exist_ok=True)
    log = RunDir(run_dir).file(LOG)
    cmd = [sys.executable, "-m", "t2", "train", *sweep.command(arm, seed, out, wandb)]
    with log.open("a", encoding="utf-8") as f:
        f.write(f"$ {sweep.shell_command(arm, seed, out, wandb)}\n")
        f.flush()
        code = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT).returncode
    if code == 130 or code < 0:
        raise KeyboardInterrupt
    if code != 0:
        raise T2Error(
            f"sweep run {arm.name}/seed-{seed} failed (exit {code}): {_last_error(log)} "
            f"(log: {log}); fix it and run the sweep again: finished runs are kept"
        )


def run_sweep(sweep: Sweep, out: Path, wandb: str) -> None:
    """Train what is missing, one run after another."""
    runs = plan(sweep, out)
    todo = [(arm, seed, state) for arm, seed, state in runs if state != "finished"]
    print(f"sweep {sweep.name}: {len(runs)} runs ({len(sweep.arms)} arms x "
          f"{len(sweep.seeds)} seeds), {len(runs) - len(todo)} finished, {len(todo)} to "
          f"train in {out}", flush=True)  # fmt: skip
    for i, (arm, seed, state) in enumerate(todo, 1):
        resumed = " (resuming)" if state == "partial" else ""
        print(f"[{i}/{len(todo)}] {arm.name} seed {seed}{resumed} ...", end=" ", flush=True)
        start = time.perf_counter()
        try:
            train_one(sweep, arm, seed, out, wandb)
        except T2Error:
            print("failed", flush=True)
            raise
        print(f"done in {duration(time.perf_counter() - start)}", flush=True)


def dry_run(sweep: Sweep, out: Path, wandb: str) -> list[str]:
    """The train.py command of every run that is not finished, one line each."""
    return [sweep.shell_command(arm, seed, out, wandb)
            for arm, seed, state in plan(sweep, out) if state != "finished"]  # fmt: skip
