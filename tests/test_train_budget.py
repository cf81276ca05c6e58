"""The training budget: max_steps, train.max_minutes, train.max_train_tokens and
train.stop_exact_match, whichever holds first, named in results.json; the counters
(train_tokens, elapsed_s) in every metrics record, saved in checkpoints and resumed."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import datasets
import numpy as np
import pytest
from test_train_runs import assert_same_log, losses, train, train_here

from t2.config import TrainConfig
from t2.data.batching import BatchSampler
from t2.data.loader import Batches, make_loader
from t2.errors import ConfigError
from t2.rundir import RunDir, load_training_state
from t2.train.budget import Budget, TargetTokens
from t2.train.tracking import read_metrics

BUDGET = 3000  # target tokens: about 12 steps of TINY's 400-token batches
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]


def _sets(*kv: str) -> list[str]:
    return [arg for item in kv for arg in ("--set", item)]


def results(run: Path) -> dict:
    return json.loads(RunDir(run).results.read_text())


def training_records(run: Path) -> list[dict]:
    return [r for r in read_metrics(run) if "loss" in r]


# ---- the rules and the host-side token count, without training ----------------------------


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"max_minutes": -1.0}, "train.max_minutes must be at least 0, got -1.0"),
        ({"max_train_tokens": -5}, "train.max_train_tokens must be at least 0, got -5"),
        ({"stop_exact_match": -0.1}, r"train.stop_exact_match must be in \[0, 1\]"),
        ({"stop_exact_match": 1.5}, r"train.stop_exact_match must be in \[0, 1\]"),
        ({"stop_exact_match": 0.5, "valid_bleu_sentences": 0}, "set train.valid_bleu_sentences"),
    ],
)
def test_bad_budget_values_fail_at_start_up_in_one_line(values, message):
    with pytest.raises(ConfigError, match=message) as err:
        TrainConfig(**values)
    assert "\n" not in str(err.value)


def _pairs(n: int, seed: int) -> datasets.Dataset:
    rng = np.random.default_rng(seed)
    rows = [rng.integers(1, 50, size=rng.integers(3, 12)).tolist() for _ in range(n)]
    return datasets.Dataset.from_dict({"src_ids": rows[::-1], "tgt_ids": rows})


def _sampler(ds: datasets.Dataset, rank: int, world: int, accumulate: int) -> BatchSampler:
    src, tgt = [len(x) for x in ds["src_ids"]], [len(x) for x in ds["tgt_ids"]]
    return BatchSampler(src, tgt, 60, 0, 3, True, rank, world, world * accumulate)


def _steps(ds, samplers, accumulate: int, n: int, workers: int = 0):
    """n optimizer steps of every process: per step, the count of rank 0's TargetTokens
    and the non-padding target tokens of all the micro-batches really handed out."""
    loaders = [
        Batches(make_loader(ds, s, 0, workers if r == 0 else 0)) for r, s in enumerate(samplers)
    ]
    counter = TargetTokens(samplers[0], [len(x) for x in ds["tgt_ids"]])
    for _ in range(n):
        micro = [next(b) for b in loaders for _ in range(accumulate)]
        yield counter.take(), sum(int(b["tgt_out"].ne(0).sum()) for b in micro)


@pytest.fixture
def forkserver_workers():
    """Loader workers started by a fork server (toy_task.forkserver_workers)."""
    from toy_task import forkserver_workers

    with forkserver_workers():
        yield


def test_target_tokens_count_the_batches_of_every_process_across_epochs_and_resume(
    forkserver_workers,
):
    ds = _pairs(120, 0)
    samplers = [_sampler(ds, r, 2, 2) for r in range(2)]  # 2 processes x accumulate 2
    steps_per_epoch = len(samplers[0]._global(0)) // 4
    got = list(_steps(ds, samplers, 2, 2 * steps_per_epoch + 3, workers=1))  # prefetching
    assert [c for c, _ in got] == [t for _, t in got] and all(t > 0 for _, t in got)
    # resumed on 1 process accumulating 5: steps no longer align with the saved position,
    # so some step takes the end of one epoch and the start of the next
    state = samplers[0].state_dict()
    one = _sampler(ds, 0, 1, 5)
    one.load_state_dict(state)
    assert (len(one._global(one.epoch)) - one.position) % 5  # a step straddles the epochs
    got = list(_steps(ds, [one], 5, 2 * len(one._global(one.epoch)) // 5 + 2))
    assert [c for c, _ in got] == [t for _, t in got]


def _budget(**train) -> Budget:
    return Budget(TrainConfig(**{"log_every": 5, **train}), tokens=None)  # type: ignore[arg-type]


def test_the_first_rule_that_holds_stops_the_run_and_the_order_is_fixed():
    budget = _budget(max_steps=10, max_train_tokens=100, max_minutes=1.0)
    assert budget.stop_reason(3) is None
    budget.train_tokens = 100
    assert budget.stop_reason(3) == "max_train_tokens"
    assert budget.stop_reason(10) == "max_steps"  # both hold: steps come first
    budget.train_tokens, budget.saved_s = 99, 60.0
    assert budget.stop_reason(3) == "max_minutes"
    assert _budget(max_steps=10).stop_reason(9) is None  # 0: no limit
    assert _budget(max_steps=10, max_minutes=1e-9).stop_reason(9) == "max_minutes"


def test_several_processes_read_the_main_clock_and_exact_match_only_where_they_sync():
    asked: list[float] = []

    def main_says(value: float) -> float:  # the broadcast: process 0's clock says 100 s
        asked.append(value)
        return 100.0

    budget = _budget(max_minutes=1.0, stop_exact_match=0.9, valid_bleu_sentences=4)
    budget.processes, budget.agree, budget.first_step = 2, main_says, 2
    assert budget.stop_reason(2) == "max_minutes"  # every process checks where it starts
    assert budget.stop_reason(3) is None and len(asked) == 1  # not a log step: no clock
    assert budget.stop_reason(5) == "max_minutes" and len(asked) == 2
    assert budget.exact_match_reached(None) and asked[-1] == 0.0  # rank 1 follows the main
    off = _budget()
    assert not off.exact_match_reached({"valid_exact_match": 0.7})  # 0: off, but remembered
    assert off.state()["valid_exact_match"] == 0.7


def test_a_run_resumed_after_meeting_its_exact_match_target_takes_no_step():
    budget = _budget(stop_exact_match=0.5, valid_bleu_sentences=4)
    budget.exact_match, budget.first_step = 0.6, 140  # as restored from the checkpoint
    assert budget.stop_reason(140) == "stop_exact_match"
    assert budget.stop_reason(141) is None  # later, only a new validation decides
    budget.exact_match = 0.4
    assert budget.stop_reason(140) is None


def test_the_time_left_is_the_nearest_limit():
    budget = _budget(max_steps=1000, max_minutes=1.0)
    budget.saved_s, budget.start = 40.0, budget.start - 10.0  # 10 steps in 10 s, 50 s spent
    assert budget.seconds_left(10) == pytest.approx(10.0, rel=0.01)  # not 990 steps' 990 s
    budget = _budget(max_steps=1000, max_train_tokens=1000)
    budget.train_tokens, budget.start = 500, budget.start - 10.0  # 500 tokens in 10 s
    assert budget.seconds_left(10) == pytest.approx(10.0, rel=0.01)
    assert _budget(max_steps=1000).seconds_left(0) == 0.0  # no pace yet, nothing to say


# ---- whole runs (tiny models, seconds each) -------------------------------------------------


@pytest.fixture(scope="module")
def token_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("budget") / "tokens"
    train_here(
        out,
        *_sets(
            "train.max_steps=1000",
            f"train.max_train_tokens={BUDGET}",
            "train.eval_every=1000",
            "train.save_every=1000",
        ),
    )
    return out


def _assert_stopped_at_the_token_budget(run: Path, budget: int) -> dict:
    res, records = results(run), training_records(run)
    assert res["stopped_by"] == "max_train_tokens" and res["steps"] == records[-1]["step"]
    # log_every=1: the step before did not reach the budget, the last did
    assert records[-2]["train_tokens"] < budget <= records[-1]["train_tokens"]
    assert res["train_tokens"] == records[-1]["train_tokens"]
    # the final validation and checkpoint at that step, as at max_steps
    assert any(r["step"] == res["steps"] and "valid_loss" in r for r in read_metrics(run))
    assert RunDir(run).latest() == RunDir(run).checkpoint(res["steps"])
    return res


@pytest.mark.slow
def test_a_token_budget_stops_the_run_and_every_record_carries_the_counters(token_run):
    res = _assert_stopped_at_the_token_budget(token_run, BUDGET)
    assert 5 < res["steps"] < 1000 and res["elapsed_s"] > 0
    everything = read_metrics(token_run)
    assert all({"train_tokens", "elapsed_s"} <= r.keys() for r in everything)
    tokens = [r["train_tokens"] for r in training_records(token_run)]
    assert all(a < b for a, b in zip(tokens, tokens[1:], strict=False))  # each step adds its batch
    elapsed = [r["elapsed_s"] for r in everything]
    assert all(a <= b for a, b in zip(elapsed, elapsed[1:], strict=False)) and elapsed[0] > 0


@pytest.mark.slow
def test_two_arms_with_one_token_budget_see_the_same_tokens(token_run, tmp_path):
    other = tmp_path / "swiglu_rmsnorm"
    train_here(
        other,
        *_sets(
            "train.max_steps=1000",
            f"train.max_train_tokens={BUDGET}",
            "train.eval_every=1000",
            "train.save_every=1000",
            "model.ffn=swiglu",
            "model.norm=rmsnorm",
        ),
    )
    a, b = _assert_stopped_at_the_token_budget(other, BUDGET), results(token_run)
    assert (a["steps"], a["train_tokens"]) == (b["steps"], b["train_tokens"])
    assert a["test_loss"] != b["test_loss"]  # two models indeed


@pytest.mark.slow
def test_a_resumed_run_continues_its_token_budget(token_run, tmp_path):
    run, sets = (
        tmp_path / "resumed",
        ["train.max_steps=1000", "train.eval_every=1000", "train.save_every=1000"],
    )
    shutil.copytree(token_run, run)
    saved, state = results(token_run), load_training_state(RunDir(token_run).latest())
    assert state["train_tokens"] == saved["train_tokens"] and state["elapsed_s"] > 0
    # resumed with the budget it has spent: no step, the same end
    train_here(run, "--resume", *_sets(*sets, f"train.max_train_tokens={BUDGET}"))
    again = results(run)
    assert {k: again[k] for k in ("stopped_by", "steps", "train_tokens")} == {
        k: saved[k] for k in ("stopped_by", "steps", "train_tokens")
    }
    assert again["elapsed_s"] >= state["elapsed_s"]
    # a raised budget: the counters go on from the checkpoint, as in one uninterrupted run
    train_here(run, "--resume", *_sets(*sets, f"train.max_train_tokens={2 * BUDGET}"))
    full = tmp_path / "full"
    train_here(full, *_sets(*sets, f"train.max_train_tokens={2 * BUDGET}"))
    _assert_stopped_at_the_token_budget(run, 2 * BUDGET)
    counted = [(r["step"], r["train_tokens"]) for r in training_records(run)]
    assert counted == [(r["step"], r["train_tokens"]) for r in training_records(full)]
    after = [r for r in training_records(run) if r["step"] > saved["steps"]]
    assert after and after[0]["train_tokens"] > saved["train_tokens"]
    assert after[0]["elapsed_s"] > state["elapsed_s"]
    assert_same_log(losses(run), losses(full))


@pytest.mark.slow
def test_a_minutes_budget_stops_the_run(tmp_path):
    out = tmp_path / "minutes"
    train_here(
        out,
        *_sets(
            "train.max_steps=100000",
            "train.max_minutes=0.002",
            "train.eval_every=1000",
            "train.save_every=1000",
        ),
    )
    res = results(out)
    assert res["stopped_by"] == "max_minutes" and 0 < res["steps"] < 100000
    assert res["elapsed_s"] >= 0.12  # 0.002 minutes
    assert RunDir(out).latest() == RunDir(out).checkpoint(res["steps"])
    assert any(r["step"] == res["steps"] and "valid_loss" in r for r in read_metrics(out))


COPY = [
    "model.d_model=64",
    "model.n_heads=4",
    "model.d_ff=128",
    "data.task_train_size=2000",
    "data.task_eval_size=32",
    "data.max_tokens=600",
    "train.max_steps=400",
    "train.log_every=20",
    "train.eval_every=10",
    "train.save_every=1000",
    "train.valid_bleu_sentences=32",
    "train.warmup_steps=20",
    "train.max_lr=5e-3",
    "train.label_smoothing=0",
    "data.train=task:copy",
    "data.valid=task:copy",
    "data.test=task:copy",
    "train.stop_exact_match=0.5",
]


@pytest.mark.slow
def test_an_exact_match_target_stops_the_run_at_the_first_validation_that_meets_it(tmp_path):
    out = tmp_path / "copy"
    train_here(out, *_sets(*COPY))
    res = results(out)
    valid = [r for r in read_metrics(out) if "valid_exact_match" in r]
    assert res["stopped_by"] == "stop_exact_match" and res["steps"] < 400
    assert valid[-1]["step"] == res["steps"] and valid[-1]["valid_exact_match"] >= 0.5
    assert all(r["valid_exact_match"] < 0.5 for r in valid[:-1]) and len(valid) > 3
    assert RunDir(out).latest() == RunDir(out).checkpoint(res["steps"])
    records = read_metrics(out)
    train_here(out, "--resume", *_sets(*COPY))  # the target was met: no further step
    assert results(out)["steps"] == res["steps"] and read_metrics(out) == records


@pytest.mark.slow
def test_two_processes_count_the_tokens_of_both_and_stop_together(tmp_path):
    """The count is global: 2 processes stop where 1 process accumulating 2 does, with the
    same tokens; and on the main process's clock, at a logged step, without a deadlock."""
    sets = _sets(
        "train.max_steps=1000",
        f"train.max_train_tokens={2 * BUDGET}",
        "train.eval_every=1000",
        "train.save_every=1000",
    )
    train(tmp_path / "ddp", *sets, launcher=TORCHRUN)
    train_here(tmp_path / "acc", *sets, "--set", "train.accumulate=2")
    ddp, acc = results(tmp_path / "ddp"), results(tmp_path / "acc")
    assert ddp["stopped_by"] == "max_train_tokens"
    assert (ddp["steps"], ddp["train_tokens"]) == (acc["steps"], acc["train_tokens"])
    clock = tmp_path / "clock"
    train(
        clock,
        *_sets(
            "train.max_steps=100000",
            "train.max_minutes=0.002",
            "train.log_every=2",
            "train.eval_every=1000",
            "train.save_every=1000",
        ),
        launcher=TORCHRUN,
    )
    res = results(clock)
    assert res["stopped_by"] == "max_minutes" and res["steps"] % 2 == 0


def test_wandb_group_job_type_and_name_come_from_the_config(tmp_path):
    from t2.config import Config
    from t2.train.tracking import init_wandb

    class Tracker:
        def init_trackers(self, project_name, config, init_kwargs):
            self.args = init_kwargs["wandb"]

    default, chosen = Tracker(), Tracker()
    init_wandb(default, Config(), "quickstart", tmp_path / "qs-seed1", "offline")
    assert (default.args["group"], default.args["name"]) == ("quickstart", "qs-seed1")
    assert "job_type" not in default.args
    cfg = Config(
        train=TrainConfig(wandb_group="sweep", wandb_job_type="rope", wandb_name="rope-seed2")
    )
    init_wandb(chosen, cfg, "quickstart", tmp_path / "qs-seed1", "offline")
    got = [chosen.args[k] for k in ("group", "job_type", "name")]
    assert got == ["sweep", "rope", "rope-seed2"]
