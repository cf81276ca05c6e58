"""Sweeps planned for power and packed onto the machine: t2.experiments.decisions.planning (the
seeds
a difference needs, from finished runs or a pilot) and t2.experiments.sweeps.jobs (N runs at
once, each on its GPU or its share of the cores; a failed run does not stop the others).
Training is replaced by writing finished runs, so no test here trains."""

from __future__ import annotations

import statistics
import threading
import time
from pathlib import Path

import pytest
from test_experiments_report import fake_run

import t2.experiments.sweeps.sweep as sweep_module
from t2.cli import main
from t2.errors import ConfigError, T2Error
from t2.experiments.decisions.planning import make_plan
from t2.experiments.decisions.verdict import same_sign_power
from t2.experiments.reports.compare import duration
from t2.experiments.statistics.welch import seeds_needed, spread_interval
from t2.experiments.sweeps.jobs import slots
from t2.experiments.sweeps.sweep import plan_sweep, run_sweep
from t2.experiments.sweeps.sweepfile import load_sweep

SWEEP = """base: quickstart
seeds: [1, 2, 3]
budget: {max_steps: 100}
detect: 0.5
arms:
  base: {}
  v2: {set: {model.positional: rope}}
"""
LOSS = {
    ("base", 1): 1.0,
    ("base", 2): 1.4,
    ("base", 3): 1.1,
    ("v2", 1): 0.9,
    ("v2", 2): 1.0,
    ("v2", 3): 1.3,
}  # test BLEU is 31 - loss (fake_run)


@pytest.fixture
def sweep(tmp_path):
    path = tmp_path / "power.yaml"
    path.write_text(SWEEP)
    return load_sweep(path), tmp_path / "out"


def fake_training(calls: list, fail: set | None = None):
    """A train_one that writes a finished run (or fails), recording where it ran."""

    def train_one(sw, arm, seed, out, wandb, slot=None):
        calls.append((arm.name, seed, slot, threading.get_ident()))
        time.sleep(0.05)  # runs overlap, as real ones do
        if fail and (arm.name, seed) in fail:
            raise T2Error(f"sweep run {arm.name}/seed-{seed} failed (exit 2): error: broken")
        fake_run(
            sw.run_dir(out, arm, seed),
            arm.recipe,
            sw.overrides(arm, seed),
            LOSS.get((arm.name, seed), 1.2),
        )

    return train_one


def test_slots_give_each_run_a_gpu_or_an_equal_share_of_the_cores():
    gpu = slots(4, 2, list(range(8)), per_gpu=2)
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in gpu] == ["0", "0", "1", "1"]
    assert {s.env["OMP_NUM_THREADS"] for s in gpu} == {"2"}
    cpu = slots(2, 0, [0, 1, 2, 3, 5])
    assert [s.cores for s in cpu] == [(0, 1), (1 + 1, 3)]  # disjoint, equal, leftovers idle
    assert all(s.env == {"OMP_NUM_THREADS": "2", "CUDA_VISIBLE_DEVICES": ""} for s in cpu)
    with pytest.raises(ConfigError, match="more than 2 GPU"):
        slots(3, 2, list(range(8)))
    with pytest.raises(ConfigError, match="more than the 2 CPU cores"):
        slots(3, 0, [0, 1])


def test_the_plan_follows_the_seed_spread_and_warns_a_sweep_short_of_it(sweep, capsys, monkeypatch):
    """The default rule reads a paired interval: the plan is a paired t-test's on the
    spread of the per-seed differences (no test outputs here: no test-set floor)."""
    sw, out = sweep
    calls: list = []
    monkeypatch.setattr(sweep_module, "train_one", fake_training(calls))
    assert make_plan(sw, out).needed is None  # nothing finished: no spread to plan from
    run_sweep(sw, out, "disabled")
    printed = capsys.readouterr().out
    assert "no arm has two finished seeds" in printed  # said before the runs started
    assert [(a, s) for a, s, _, _ in calls] == [(a, s) for s in (1, 2, 3) for a in ("base", "v2")]
    plan = make_plan(sw, out)
    gaps = [LOSS[("base", s)] - LOSS[("v2", s)] for s in (1, 2, 3)]  # v2's BLEU gain
    spread = statistics.stdev(gaps)
    assert plan.spread.paired and plan.spread.value == pytest.approx(spread)
    assert (plan.spread.runs, plan.spread.df, plan.floor) == (3, 2, None)
    low, high = spread_interval(spread, 2)  # what the spread's own uncertainty allows
    few, many = (seeds_needed(x, 0.5, paired=True) for x in (low, high))
    assert few < plan.needed < many
    assert f"interval {low:.2f} to {high:.2f} asks {few} to {many} seeds" in plan.text()
    assert plan.needed == seeds_needed(spread, 0.5, paired=True) > 3 and plan.enough is False
    assert "too few to tell that difference" in plan.text()
    assert f"-> {plan.needed} seeds per arm" in plan.text()
    side_by_side = make_plan(sw, out, at_once=2).text()  # 2 runs a round, 50 s each
    assert f"~{duration(plan.needed * 50.0)} 2 at a time" in side_by_side
    run_sweep(sw, out, "disabled")  # all finished: nothing to train, the plan said first
    assert "too few to tell that difference" in capsys.readouterr().out
    with pytest.raises(SystemExit) as done:  # the report carries the plan from its own runs
        main(["sweep", str(sw.path), "--out", str(out), "--report-only"])
    assert done.value.code == 0
    power = (out / "report.md").read_text().split("## Power\n\n")[1].split("\n## ")[0]
    assert plan.text() in power and "too few to tell that difference" in power
    welch = load_sweep_text(
        sw, SWEEP.replace("detect: 0.5", "rule: {detect: 0.5, decide: welch_pooled}")
    )
    by_arm = [[31 - LOSS[(a, s)] for s in (1, 2, 3)] for a in ("base", "v2")]
    pooled = statistics.fmean(statistics.variance(v) for v in by_arm) ** 0.5
    apart = make_plan(welch, out)  # a two-sample rule: one arm's spread, Welch's sizing
    assert not apart.spread.paired and apart.spread.value == pytest.approx(pooled)
    assert apart.needed == seeds_needed(pooled, 0.5)


def test_same_sign_says_when_no_number_of_seeds_reaches_its_power(sweep, monkeypatch):
    sw, out = sweep
    monkeypatch.setattr(sweep_module, "train_one", fake_training([]))
    run_sweep(sw, out, "disabled")
    rule = "rule: {detect: 0.4, decide: same_sign}"
    text = make_plan(load_sweep_text(sw, SWEEP.replace("detect: 0.5", rule)), out).text()
    spread = statistics.stdev([LOSS[("base", s)] - LOSS[("v2", s)] for s in (1, 2, 3)])
    at_most = same_sign_power(0.4, spread, 3)
    assert f"with probability at most {at_most:.2g} at the sweep's 3 seeds" in text
    plan = make_plan(load_sweep_text(sw, SWEEP.replace("detect: 0.5", rule)), out)
    below = same_sign_power(0.4, spread, plan.needed)
    assert below < 0.8 and f"at most {below:.2g}: no number of seeds gives same_sign 80%" in text


def load_sweep_text(sw, text: str):
    path = Path(sw.path).with_name("other.yaml")
    path.write_text(text)
    return load_sweep(path)


def test_plan_trains_a_pilot_of_the_baseline_when_nothing_is_finished(sweep, monkeypatch):
    sw, out = sweep
    calls: list = []
    monkeypatch.setattr(sweep_module, "train_one", fake_training(calls))
    text = plan_sweep(sw, out, "disabled")
    assert [(a, s) for a, s, _, _ in calls] == [("base", 1), ("base", 2)]
    spread = statistics.stdev([30.0, 29.6])
    assert f"seed spread {spread:.2f} (sd over 2 finished runs" in text
    assert "no pairs yet" in text and "the sweep gives 3" in text
    bad = Path(sw.path).with_name("nodetect.yaml")
    bad.write_text(SWEEP.replace("detect: 0.5\n", ""))
    with pytest.raises(ConfigError, match="--plan needs the difference to detect"):
        plan_sweep(load_sweep(bad), out, "disabled")


def test_jobs_run_at_once_in_their_slots_and_a_failure_does_not_stop_the_others(sweep, monkeypatch):
    sw, out = sweep
    calls: list = []
    monkeypatch.setattr(sweep_module, "train_one", fake_training(calls, {("v2", 2)}))
    places = slots(2, 0, [0, 1])
    with pytest.raises(T2Error, match=r"^sweep run v2/seed-2 failed"):
        run_sweep(sw, out, "disabled", places)
    assert len(calls) == 6 and {id(c[2]) for c in calls} == {id(p) for p in places}
    assert len({c[3] for c in calls}) == 2  # two runs at a time
    finished = [p for p in out.glob("*/seed-*") if (p / "results.json").is_file()]
    assert len(finished) == 5  # every other run trained
