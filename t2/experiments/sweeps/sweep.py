"""Run a sweep: every arm x seed without a finished run, one `t2 train` process each.

The sweep's plan (t2.experiments.decisions.plan) is recorded before the first run, and each run
carries its hash (train.sweep_plan, written to meta.json); a sweep file that states
another plan trains nothing until `--plan-changed` records the change. A run is finished
when its results.json exists; any other is started with --resume, so a run cut off
(Ctrl-C, a killed machine) continues from its newest checkpoint and the sweep as a whole
continues where it stopped. A finished run whose config no longer matches the sweep file
stops the sweep (one line naming the keys), so a report never mixes two settings under
one arm name. A plan with looks trains look by look, and stops at a look where every arm
has a verdict. Each run's output goes to OUT/ARM/seed-S/sweep.log.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from t2.data.config import TEST_IS_VALID
from t2.errors import ConfigError, T2Error
from t2.experiments.decisions.plan import differences, plan_of
from t2.experiments.decisions.planbook import FILE, Book, settle
from t2.experiments.decisions.planning import make_plan, pilot_seeds
from t2.experiments.decisions.readings import Reading, decide_family
from t2.experiments.decisions.verdict import is_verdict
from t2.experiments.reports.compare import duration
from t2.experiments.reports.report import collect
from t2.experiments.sweeps.jobs import Slot
from t2.experiments.sweeps.records import copy_records
from t2.experiments.sweeps.runs import flatten, read_run
from t2.experiments.sweeps.sweepfile import Arm, Sweep
from t2.recipes import load_config
from t2.rundir import RunDir
from t2.rundir.layout import SWEEP_LOG
from t2.section import AUTO

# set from the tokenizer when a run starts; and the plan's hash, which the report checks
DERIVED = frozenset({"model.vocab_size", "train.sweep_plan"})


def status(run_dir: Path) -> str:
    """finished (results.json), partial (checkpoints to resume) or new."""
    run = RunDir(run_dir)
    if run.results.is_file():
        return "finished"
    return "partial" if run.latest() is not None else "new"


def check_finished(sweep: Sweep, arm: Arm, seed: int, run_dir: Path) -> None:
    """A finished run must have been trained with what the sweep file says now; a key the
    file leaves `auto` was the run's to resolve for its machine (config.yaml holds the
    answer: the batch plan's numbers, whether it compiled), so any value matches it."""
    want = flatten(load_config(arm.recipe, sweep.overrides(arm, seed)).to_dict())
    have = read_run(run_dir).config
    checked = [k for k in want if k in have and k not in DERIVED and want[k] != AUTO]
    changed = [k for k in checked if have[k] != want[k]]
    if changed:
        shown = ", ".join(f"{k}={have[k]!r} (sweep file: {want[k]!r})" for k in changed[:4])
        raise ConfigError(
            f"{run_dir} was trained with {shown}; restore the sweep file, or remove the "
            f"folder to retrain it, or pass another --out"
        )


def finished(sweep: Sweep, out: Path) -> int:
    """How many of the sweep's runs in `out` are finished."""
    runs = [sweep.run_dir(out, arm, seed) for arm in sweep.arms for seed in sweep.seeds]
    return sum(status(path) == "finished" for path in runs)


def record_plan(
    sweep: Sweep, out: Path, home: Path, accept: bool, training: bool
) -> tuple[Sweep, Book]:
    """The sweep with the hash its runs carry, and `home`'s plan record: the sweep file's
    plan recorded if there is none (with the runs in `out` begun and finished by then);
    with `accept`, recorded as a change. Training under a plan that differs from the one
    recorded stops here in one line; a report only says so."""
    plan = plan_of(sweep)
    states = [status(sweep.run_dir(out, a, s)) for a in sweep.arms for s in sweep.seeds]
    started, done = sum(state != "new" for state in states), states.count("finished")
    book = settle(home, plan, started, done, accept)
    if plan.digest() != book.current.digest:
        changes = "; ".join(differences(book.current.plan, plan)[:3])
        if training:
            raise ConfigError(
                f"{sweep.path} states another plan than {Path(home) / FILE} ({changes}); "
                f"restore the file, or pass --plan-changed to record the change (disclosed)"
            )
        print(f"warning: {sweep.path} states another plan than {Path(home) / FILE}: {changes}")
    return replace(sweep, plan=book.current.digest), book


def arms_scored_on_validation(sweep: Sweep) -> list[str]:
    """The arms whose test split is their validation split."""
    configs = {
        arm.name: load_config(arm.recipe, sweep.overrides(arm, sweep.seeds[0]))
        for arm in sweep.arms
    }
    return [name for name, cfg in configs.items() if cfg.data.test_is_valid]


def plan(sweep: Sweep, out: Path) -> list[tuple[Arm, int, str]]:
    """Every run of the sweep with its status, seed by seed (each seed's arms together, so
    runs side by side share the machine alike and a cut-off sweep leaves paired seeds);
    finished runs checked against the file."""
    runs = []
    for seed in sweep.seeds:
        for arm in sweep.arms:
            state = status(sweep.run_dir(out, arm, seed))
            if state == "finished":
                check_finished(sweep, arm, seed, sweep.run_dir(out, arm, seed))
            runs.append((arm, seed, state))
    return runs


def _last_error(log: Path) -> str:
    lines = [x.strip() for x in log.read_text(encoding="utf-8", errors="replace").splitlines()]
    errors = [x for x in lines if x.startswith("error:")]
    return (errors or [x for x in lines if x] or ["no output"])[-1]


def train_one(
    sweep: Sweep, arm: Arm, seed: int, out: Path, wandb: str, slot: Slot | None = None
) -> None:
    """One run as a child process (`python -m t2 train ...`), its output in a log file;
    on `slot`'s GPU or cores (t2.experiments.sweeps.jobs) when given."""
    run_dir = sweep.run_dir(out, arm, seed)
    run_dir.mkdir(parents=True, exist_ok=True)
    log = RunDir(run_dir).file(SWEEP_LOG)
    cmd = [sys.executable, "-m", "t2", "train", *sweep.command(arm, seed, out, wandb)]
    with log.open("a", encoding="utf-8") as f:
        f.write(f"$ {sweep.shell_command(arm, seed, out, wandb)}\n")
        f.flush()
        env = {**os.environ, **slot.env} if slot else None
        code = subprocess.run(
            cmd, stdout=f, stderr=subprocess.STDOUT, env=env, preexec_fn=slot.pin if slot else None
        ).returncode
    if code == 130 or code < 0:
        raise KeyboardInterrupt
    if code != 0:
        raise T2Error(
            f"sweep run {arm.name}/seed-{seed} failed (exit {code}): {_last_error(log)} "
            f"(log: {log}); fix it and run the sweep again: finished runs are kept"
        )


def _train(
    sweep: Sweep,
    out: Path,
    wandb: str,
    places: list[Slot] | None,
    todo: list[tuple[Arm, int, str]],
    records: Path | None,
) -> None:
    """Train `todo`: one run at a time, stopping at a failure; or len(places) at once,
    each in its slot, where a failed run is reported, the others go on, and the sweep ends
    with one line naming the failures."""
    free: queue.SimpleQueue = queue.SimpleQueue()
    for slot in places or [None]:
        free.put(slot)

    def one(i: int, arm: Arm, seed: int, state: str) -> str | None:
        slot = free.get()
        start = time.perf_counter()
        try:
            train_one(sweep, arm, seed, out, wandb, slot)
            outcome, failure = f"done in {duration(time.perf_counter() - start)}", None
            if records is not None:
                copy_records(sweep.run_dir(out, arm, seed), sweep.run_dir(records, arm, seed))
        except T2Error as err:
            outcome, failure = "failed", str(err)
        finally:
            free.put(slot)
        resumed = " (resuming)" if state == "partial" else ""
        print(f"[{i}/{len(todo)}] {arm.name} seed {seed}{resumed}: {outcome}", flush=True)
        return failure

    if not places:  # one at a time: the first failure stops the sweep
        for i, (arm, seed, state) in enumerate(todo, 1):
            if failure := one(i, arm, seed, state):
                raise T2Error(failure)
        return
    with ThreadPoolExecutor(max_workers=len(places)) as pool:
        failures = [f for f in pool.map(lambda t: one(t[0], *t[1]), enumerate(todo, 1)) if f]
    if len(failures) == 1:
        raise T2Error(failures[0])
    if failures:
        raise T2Error(f"{len(failures)} sweep runs failed; the first: {failures[0]}")


def look_verdicts(sweep: Sweep, out: Path) -> dict[str, str] | None:
    """Each arm's verdict at the planned look its finished runs make, when every arm has
    one (the sweep may stop there); else None."""
    runs, _ = collect(sweep, out)
    arms = tuple(arm.name for arm in sweep.arms)  # the family the report reads too
    reading = Reading("planned", sweep.rule, sweep.seeds, sweep.baseline, arms)
    found = {}
    for name, decision in decide_family(reading, sweep.baseline, runs, {}).items():
        if decision.look is None or decision.word is None or not is_verdict(decision.word):
            return None
        found[name] = f"{decision.word} ({decision.look.text()})"
    return found


def run_sweep(
    sweep: Sweep,
    out: Path,
    wandb: str,
    places: list[Slot] | None = None,
    only: list[tuple[Arm, int]] | None = None,
    records: Path | None = None,
) -> None:
    """Train what is missing (of `only`, if given), each run's records copied into
    `records` as it finishes (t2.experiments.sweeps.records), when given. A plan with looks
    trains the seeds of one look at a time and stops at a look that gives every arm a
    verdict."""
    runs = [r for r in plan(sweep, out) if only is None or (r[0], r[1]) in only]
    todo = [(arm, seed, state) for arm, seed, state in runs if state != "finished"]
    at_once = f", {len(places)} at a time" if places else ""
    what = f"{len(sweep.arms)} arms x {len(sweep.seeds)} seeds" if only is None else "a pilot"
    print(
        f"sweep {sweep.name}: {len(runs)} runs ({what}), {len(runs) - len(todo)} finished, "
        f"{len(todo)} to train in {out}{at_once}",
        flush=True,
    )
    if same := arms_scored_on_validation(sweep):
        print(f"warning: test = validation in arms {', '.join(same)}: {TEST_IS_VALID}", flush=True)
    if sweep.detect is not None and only is None:
        print(make_plan(sweep, out, len(places) if places else 1).text(), flush=True)
    looks = sweep.rule.looks if only is None else ()
    for n in looks[:-1]:
        seeds = sweep.seeds[:n]
        _train(sweep, out, wandb, places, [t for t in todo if t[1] in seeds], records)
        if (found := look_verdicts(sweep, out)) is not None:
            shown = "; ".join(f"{arm}: {word}" for arm, word in found.items())
            print(f"every arm has a verdict at this look ({shown}): the sweep stops here")
            return
    done = set(sweep.seeds[: looks[-2]]) if looks else set()
    _train(sweep, out, wandb, places, [t for t in todo if t[1] not in done], records)


def dry_run(sweep: Sweep, out: Path, wandb: str) -> list[str]:
    """The train.py command of every run that is not finished, one line each."""
    return [
        sweep.shell_command(arm, seed, out, wandb)
        for arm, seed, state in plan(sweep, out)
        if state != "finished"
    ]


def plan_sweep(
    sweep: Sweep,
    out: Path,
    wandb: str,
    places: list[Slot] | None = None,
    records: Path | None = None,
) -> str:
    """The power plan (t2.experiments.decisions.planning), from the finished runs' seed spread; with
    none to measure it, after training the pilot: the baseline's first two seeds."""
    if sweep.detect is None:
        raise ConfigError(
            f"--plan needs the difference to detect: add detect: BLEU (e.g. detect: 0.5) "
            f"to {sweep.path}"
        )
    at_once = len(places) if places else 1
    found = make_plan(sweep, out, at_once)
    if found.needed is None:
        baseline = sweep.arm(sweep.baseline)
        print(f"pilot: {baseline.name} seeds {', '.join(map(str, pilot_seeds(sweep)))}", flush=True)
        pilot = [(baseline, s) for s in pilot_seeds(sweep)]
        extra = [s for _, s in pilot if s not in sweep.seeds]
        widened = replace(sweep, seeds=sweep.seeds + tuple(extra))
        run_sweep(widened, out, wandb, places, only=pilot, records=records)
        found = make_plan(widened, out, at_once)
        found = replace(found, given=len(sweep.seeds))
    return found.text()
