"""Run the sanity suite: each combination trains on each task through the real training path
(t2.train.run_training, as `t2 train` does), stopping once validation reaches the pass mark.

Every (combination, task) has its run directory, OUT/COMBINATION/TASK; one whose
results.json exists is read instead of trained again, and one with checkpoints but no
results resumes, so an interrupted suite continues where it stopped.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from t2.config import Config
from t2.errors import T2Error
from t2.recipes import load_config
from t2.rundir import RunDir, step_of
from t2.sanity.combos import PASS_MARKS, TASK_RECIPES, Combination, expected_failure
from t2.train.run import run_training
from t2.train.setup import check_run_dir


@dataclass(frozen=True)
class Outcome:
    """One training of the suite, as its results.json (or its error) tells it."""

    combo: Combination
    task: str
    mark: float  # the pass mark: test exact match at least this, validation reaching it
    exact_match: float | None = None  # on the test split
    steps: int | None = None
    stopped_by: str = ""
    seconds: float | None = None  # training wall time (results.json's elapsed_s)
    sentences: int | None = None  # test sentences scored
    error: str = ""
    read: bool = False  # read from a finished run's results.json, not trained now
    scored: int | None = None  # the step of the checkpoint results.json scored

    @property
    def note(self) -> str:
        """Why the row is not a plain pass or fail: an error, an expected failure, or a test
        figure that is not of the model that reached the mark."""
        if self.error or self.expected:
            return self.error or self.expected
        if self.stopped_by == "stop_exact_match" and self.scored not in (None, self.steps):
            return (
                f"test scored the checkpoint of step {self.scored}, not that of step "
                f"{self.steps}, which reached the mark (train.best_metric)"
            )
        return ""

    @property
    def floor(self) -> float:
        """The lowest test exact match that still agrees with reaching the mark: the mark less
        3 binomial standard errors at the mark (97.9% for 99% on 1,000 sentences). The stop
        takes the first validation at the mark, so a test figure a little under it is
        sampling noise, not a failure; one far under it is (docs/sanity.md)."""
        n = max(self.sentences or 1, 1)
        return self.mark - 3 * math.sqrt(self.mark * (1 - self.mark) / n)

    @property
    def passed(self) -> bool:
        """Validation reached the mark within train.max_steps, and the test split agrees."""
        reached = self.stopped_by == "stop_exact_match"
        return reached and self.exact_match is not None and self.exact_match >= self.floor

    @property
    def expected(self) -> str:
        return expected_failure(self.combo, self.task)

    @property
    def status(self) -> str:
        """pass | FAIL | ERROR | expected to fail | UNEXPECTED PASS (position leaks in)."""
        if self.error:
            return "ERROR"
        if self.expected:
            return "UNEXPECTED PASS" if self.passed else "expected to fail"
        return "pass" if self.passed else "FAIL"

    @property
    def ok(self) -> bool:
        """Whether this row leaves the suite's exit status at zero."""
        return self.status in ("pass", "expected to fail")


def task_config(combo: Combination, task: str, overrides: list[str]) -> Config:
    """The task's sanity recipe with the combination's components and the stop at its mark."""
    data = [f"data.{split}=task:{task}" for split in ("train", "valid", "test")]
    stop = f"train.stop_exact_match={PASS_MARKS[task]}"
    sets = [*combo.overrides(), *data, stop, *overrides]
    return load_config(TASK_RECIPES[task], sets)


def _outcome(combo: Combination, task: str, results: dict[str, Any], read: bool) -> Outcome:
    scored = step_of(results["checkpoint"]) if results.get("checkpoint") else None
    return Outcome(
        combo,
        task,
        PASS_MARKS[task],
        results.get("exact_match"),
        results.get("steps"),
        results.get("stopped_by", ""),
        results.get("elapsed_s"),
        results.get("n_sentences"),
        read=read,
        scored=scored,
    )


def _train(cfg: Config, recipe: str, folder: Path, wandb: str) -> dict[str, Any]:
    """One training, its output in FOLDER/train.log; resumes a run that has checkpoints."""

    resume = RunDir(folder).has_checkpoints()
    folder.mkdir(parents=True, exist_ok=True)
    log = open(folder / "train.log", "a", encoding="utf-8")  # noqa: SIM115 (closed below)
    with log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        try:
            return run_training(cfg, recipe, folder, resume, wandb)
        except Exception:
            traceback.print_exc()  # into train.log: the table shows one line
            raise


def run_one(
    combo: Combination, task: str, out: Path, overrides: list[str], wandb: str = "disabled"
) -> Outcome:
    """Train (or read) one combination on one task; an error becomes a row, not a crash."""

    folder = out / combo.folder / task
    cfg = task_config(combo, task, overrides)
    run = RunDir(folder)
    # a run or results of another config are not reused: one line, before any work
    check_run_dir(run, cfg, resume=run.results.is_file() or run.has_checkpoints())
    if run.results.is_file():
        return _outcome(combo, task, json.loads(run.results.read_text(encoding="utf-8")), True)
    try:
        results = _train(cfg, TASK_RECIPES[task], folder, wandb)
    except T2Error as err:
        return Outcome(combo, task, PASS_MARKS[task], error=str(err))
    except Exception as err:  # a bug in a component: the suite's point is to show it
        return Outcome(combo, task, PASS_MARKS[task], error=f"{type(err).__name__}: {err}")
    return _outcome(combo, task, results, False)


def describe(outcome: Outcome) -> str:
    """One line: `rope on copy: pass, exact match 100.0% after 600 steps (58 s training)`."""
    o = outcome
    if o.error:
        return f"{o.combo.label} on {o.task}: ERROR {o.error} (see its train.log)"
    figures = f"exact match {100 * (o.exact_match or 0):.1f}% after {o.steps} steps"
    return f"{o.combo.label} on {o.task}: {o.status}, {figures} ({o.seconds or 0:.0f} s training)"


def run_sanity_suite(
    combos: list[Combination],
    tasks: list[str],
    out: Path,
    overrides: list[str],
    wandb: str = "disabled",
    echo: Callable[[str], None] = print,
) -> list[Outcome]:
    """Every combination on every task, in order, one line echoed per training with the wall
    and CPU seconds it took here (CPU seconds barely move when other work shares the cores)."""
    import datasets

    datasets.disable_progress_bars()
    pairs = [(combo, task) for combo in combos for task in tasks]
    outcomes = []
    for i, (combo, task) in enumerate(pairs, 1):
        wall, cpu = time.perf_counter(), time.process_time()
        outcome = run_one(combo, task, out, overrides, wandb)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        here = "; read" if outcome.read else f"; {wall:.0f} s wall, {cpu:.0f} s CPU here"
        echo(f"[{i}/{len(pairs)}] {describe(outcome)[:-1]}{here})")
        outcomes.append(outcome)
    return outcomes
