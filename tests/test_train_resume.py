"""Exact resume as a user meets it: a run killed with SIGKILL at any moment (inside a
checkpoint write too) and resumed ends with the loss log and weights of an uninterrupted
run; a run saved by 2 processes resumes on 1 accumulating 2; a changed setting is refused."""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from test_train_runs import (
    ENV,
    ROOT,
    TINY,
    assert_same_log,
    final_weights,
    losses,
    train,
    train_here,
)

from t2.errors import CheckpointError
from t2.rundir import RunDir, resolve
from t2.rundir.resume import resume_point

# 12 steps, a checkpoint and a validation every 3, a background loader, epochs of ~4 steps,
# and dropout: a resumed run must draw the very same masks (TINY turns dropout off)
LONGER = [
    "train.max_steps=12",
    "train.loader_workers=1",
    "data.task_train_size=200",
    "train.valid_bleu_sentences=2",
    "model.dropout=0.1",
]
KILL_IN_WRITE = """
import os, runpy, signal, sys
import t2.rundir.store as store
write_json = store.write_json
def killed_mid_write(path, record):  # after the weights and state, before meta and COMPLETE
    if "step-0000006" in str(path):
        os.kill(os.getpid(), signal.SIGKILL)
    write_json(path, record)
store.write_json = killed_mid_write
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _sets(*kv: str) -> list[str]:
    return [arg for item in kv for arg in ("--set", item)]


def _command(out: Path, *extra: str, python: list[str] | None = None) -> list[str]:
    return [
        *(python or [sys.executable]),
        str(ROOT / "train.py"),
        "--recipe",
        "quickstart",
        "--out",
        str(out),
        "--wandb",
        "disabled",
        *_sets(*TINY, *LONGER),
        *extra,
    ]


def _kill_when(cmd: list[str], ready) -> float:  # noqa: ANN001  (a predicate of the seconds)
    """Start `cmd`, SIGKILL it once `ready` holds; the seconds it lived."""
    proc = subprocess.Popen(
        cmd, env=ENV, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    start = time.monotonic()
    while proc.poll() is None and not ready(time.monotonic() - start):
        time.sleep(0.05)
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    return time.monotonic() - start


def _logged_step(run: Path) -> int:
    path = RunDir(run).metrics
    lines = path.read_text().splitlines() if path.is_file() else []
    return max((int(line.split('"step": ')[1].split(",")[0]) for line in lines), default=0)


@pytest.mark.slow
def test_a_run_killed_at_any_moment_resumes_to_the_uninterrupted_result(tmp_path):
    """The kills need processes; the reference and the resumed runs train in this one (the
    state comes from the folder: a resume in a new process is test_train_runs')."""
    full = tmp_path / "full"
    train_here(full, *_sets(*LONGER))
    lived = []  # the seconds the run killed after step 8 lived, from its start
    share = random.Random(8).uniform(0.3, 0.9)
    script = tmp_path / "kill_in_write.py"
    script.write_text(KILL_IN_WRITE)
    moments = {
        "inside the checkpoint write of step 6": lambda run: subprocess.run(
            _command(run, python=[sys.executable, str(script)]),
            env=ENV,
            cwd=ROOT,
            capture_output=True,
            timeout=300,
        ),
        "between checkpoints, after step 8 was logged": lambda run: lived.append(
            _kill_when(_command(run), lambda seconds: _logged_step(run) >= 8 or seconds > 300)
        ),
        f"at a random moment ({share:.2f} of the life of the run killed after step 8)": (
            lambda run: _kill_when(_command(run), lambda seconds: seconds > share * lived[0])
        ),
    }
    for i, (moment, kill) in enumerate(moments.items()):
        run = tmp_path / f"killed{i}"
        kill(run)
        if i == 0:  # the cut-off write left only its .tmp- folder, never loaded
            assert RunDir(run).latest() == RunDir(run).checkpoint(3), moment
            assert any(RunDir(run).checkpoint_dir.glob(".tmp-step-0000006-*")), moment
        train_here(run, *_sets(*LONGER), "--resume")
        assert_same_log(losses(run), losses(full))
        want, got = final_weights(full), final_weights(run)
        for name in want:
            torch.testing.assert_close(got[name], want[name], rtol=0, atol=1e-6, msg=moment)


@pytest.mark.slow
def test_two_processes_resumed_on_one_accumulating_two_match_two_throughout(tmp_path):
    """The data position is global: 1 process x accumulate 2 takes the very batches that 2
    processes had left, in the same steps, and with dropout on the same masks: a batch's
    random draws follow its place in the global list, not the process (ShapedBatch.seed).
    The reference is 1 process x accumulate 2 throughout, which 2 processes match (their
    steps here; their weights, uninterrupted, in test_train_runs): a torchrun job less."""
    torchrun = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
    ]
    # dropout on, and the batch plan's auto keys: 2 processes plan 2 x 1 x 400 tokens; one
    # process resumed keeps the 400-token micro-batch and plans accumulate 2
    sets = (
        "--set",
        "model.dropout=0.1",
        "--set",
        "data.max_tokens=auto",
        "--set",
        "train.accumulate=auto",
        "--set",
        "train.global_batch=800",
    )
    cut = train(tmp_path / "cut", *sets, "--set", "train.max_steps=3", launcher=torchrun)
    assert "batch plan: 2 processes x 1 micro-batch x 400 tokens" in cut.stdout
    saved = yaml.safe_load((tmp_path / "cut" / "config.yaml").read_text())
    assert (saved["data"]["max_tokens"], saved["train"]["accumulate"]) == (400, 1)
    result = train_here(tmp_path / "cut", *sets, "--resume")
    assert "1 process x 2 micro-batches x 400 tokens" in result.stdout
    assert "batches per step" not in result.stdout  # 2 x 1 and 1 x 2: the same per step
    one = train_here(tmp_path / "one", *sets, "--set", "data.max_tokens=400")
    assert "batch plan: 1 process x 2 micro-batches x 400 tokens" in one.stdout
    assert_same_log(losses(tmp_path / "cut"), losses(tmp_path / "one"))
    one, cut = final_weights(tmp_path / "one"), final_weights(tmp_path / "cut")
    for name in one:
        torch.testing.assert_close(cut[name], one[name], rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.slow
def test_resume_refuses_a_changed_batch_budget_or_seed_naming_the_key(tmp_path):
    run = tmp_path / "run"
    train_here(run, "--set", "train.max_steps=3")
    changed = {"data.max_tokens": "300", "train.seed": "5"}  # one refusal names each
    result = train(run, "--resume", *_sets(*(f"{k}={v}" for k, v in changed.items())), check=False)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    for key, value in changed.items():
        assert f"{key}=" in result.stderr and f"(now {value})" in result.stderr, result.stderr


def test_a_run_of_a_future_format_is_not_resumed(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("model:\n  d_model: 32\n")
    (run / "meta.json").write_text('{"format": 99, "t2": "9.0"}')
    result = train(run, "--resume", check=False)
    assert result.returncode == 2 and "format 99 (t2 9.0)" in result.stderr, result.stderr
    assert "upgrade t2" in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.slow
def test_a_log_line_torn_by_a_crash_is_dropped_on_resume_and_a_damaged_log_refused(
    tmp_path, tiny_run
):
    """A process killed mid-append leaves half a line: --resume drops it with the other
    records past the checkpoint (the log then matches an uninterrupted run); a bad line
    before the last is damage, refused in one line."""
    from test_train_runs import assert_same_log, losses

    run = tmp_path / "run"
    train_here(run, "--set", "train.max_steps=3")
    metrics = RunDir(run).metrics
    with metrics.open("a") as f:
        f.write('{"step": 4, "loss": 1.2')  # the crash
    train_here(run, "--resume")
    assert_same_log(losses(run), losses(tiny_run))
    lines = metrics.read_text().splitlines()
    metrics.write_text("\n".join([lines[0], "{not json", *lines[1:]]) + "\n")
    result = train(run, "--resume", "--set", "train.max_steps=9", check=False)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr[-2000:]
    assert "line 2 is not JSON: the log is damaged" in result.stderr


def _held(lock: Path) -> bool:
    import fcntl

    if not lock.is_file():
        return False
    with lock.open("a") as f:  # a POSIX lock of this process, released as the file closes
        try:
            fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        return False


@pytest.mark.slow
def test_a_second_run_in_a_held_folder_is_refused_until_the_holder_ends(tmp_path):
    """Two trainings with one --out: the second refuses in one line while the first holds
    the folder, and a holder killed with SIGKILL releases it (the kernel drops the lock)."""
    run = tmp_path / "run"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    first = subprocess.Popen(
        _command(run, "--set", "train.max_steps=100000"), env=ENV, cwd=ROOT, **quiet
    )
    deadline = time.monotonic() + 120
    while not _held(run / ".lock"):
        assert first.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    second = train(run, check=False)
    assert second.returncode == 2 and second.stderr.count("\n") == 1, second.stderr[-2000:]
    assert "is in use by a training run (pid" in second.stderr
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert not _held(run / ".lock")
    RunDir(run).lock().close()  # free again: another run could take it


SIGNAL_AT_STEP = """
import os, runpy, signal, sys
import t2.train.loop as loop
step_fn, calls = loop.train_step, [0]
def signalled(*args, **kwargs):  # the signal arrives during step N (counted from 1)
    step_fn(*args, **kwargs)
    calls[0] += 1
    if calls[0] == int(os.environ["T2_SIGNAL_STEP"]):
        os.kill(os.getpid(), getattr(signal, os.environ["T2_SIGNAL"]))
loop.train_step = signalled
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.slow
def test_a_preempted_run_saves_its_step_and_resumes_to_the_uninterrupted_log(tmp_path):
    """A scheduler's signal mid-interval (log_every 4, at step 5, dropout on): a checkpoint
    of step 5, one line, exit 128 + the signal; under SLURM SIGUSR1 requeues the job. The
    run resumed after SIGTERM ends with the uninterrupted run's loss log and weights."""
    from test_train_runs import assert_same_log, final_weights, losses

    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "scontrol").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "requeued"}\n')
    (fake / "scontrol").chmod(0o755)
    every = ["--set", "train.log_every=4"]
    train_here(tmp_path / "full", *_sets(*LONGER), *every)
    for name in ("SIGUSR1", "SIGTERM"):  # SIGTERM last: that run is resumed
        env = {
            **ENV,
            "T2_SIGNAL_STEP": "5",
            "T2_SIGNAL": name,
            "SLURM_JOB_ID": "4242",
            "PATH": f"{fake}:{ENV['PATH']}",
        }
        run = tmp_path / name
        python = [sys.executable, "-c", SIGNAL_AT_STEP]
        cut = subprocess.run(
            _command(run, *every, python=python), env=env, cwd=ROOT, capture_output=True, text=True
        )
        signum = getattr(signal, name)
        assert cut.returncode == 128 + signum and cut.stderr.count("\n") == 1, cut.stderr
        assert f"{name} at step 5: checkpoint" in cut.stderr and "--resume" in cut.stderr
        assert RunDir(run).latest().name == "step-0000005"
    assert (tmp_path / "requeued").read_text() == "requeue 4242\n"  # SIGUSR1's only
    again = subprocess.run(
        _command(run, *every, "--resume"), env=ENV, cwd=ROOT, capture_output=True, text=True
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert_same_log(losses(run), losses(tmp_path / "full"))
    want, got = final_weights(tmp_path / "full"), final_weights(run)
    for key in want:
        torch.testing.assert_close(got[key], want[key], msg=key)


FINAL_EVALUATION_SIGNAL = """
import os, runpy, signal, sys
import t2.train.run as run
evaluate = run.final_evaluation
def signalled(*args, **kwargs):  # SIGTERM arrives as the test split's decoding begins
    os.kill(os.getpid(), signal.SIGTERM)
    return evaluate(*args, **kwargs)
run.final_evaluation = signalled
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
TIME_RUNS_OUT = """
import os, runpy, signal, sys, time
import t2.train.budget as budget, t2.train.loop as loop
step_fn, calls = loop.train_step, [0]
class Clock:  # the budget's clock reads an hour later from step 3 on: past max_minutes
    @staticmethod
    def perf_counter():
        return time.perf_counter() + 3600 * (calls[0] >= 3)
def signalled(*args, **kwargs):  # and SIGTERM arrives in that step
    step_fn(*args, **kwargs)
    calls[0] += 1
    if calls[0] == 3:
        os.kill(os.getpid(), signal.SIGTERM)
budget.time, loop.train_step = Clock, signalled
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _signalled(run: Path, program: str, *extra: str, step: int = 0):
    env = {**ENV, "T2_SIGNAL_STEP": str(step), "T2_SIGNAL": "SIGTERM"}
    cmd = _command(run, *_sets("train.max_steps=6", "train.loader_workers=0"), *extra)
    cmd[:1] = [sys.executable, "-c", program]
    return subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)


def _scoring(run: Path) -> str:
    return f"score it on the test split with `t2 evaluate --checkpoint {run}`"


@pytest.mark.slow
def test_a_signal_in_the_last_step_or_the_final_evaluation_ends_the_run_in_one_line(tmp_path):
    """SIGTERM in the step that reaches train.max_steps stops the run there, with that
    step's checkpoint and one line saying how to score it, instead of decoding the test
    split past the scheduler's grace period; resumed, the run goes to its final
    evaluation, and a SIGTERM there ends it at once in one line naming the checkpoint."""
    run = tmp_path / "run"
    last = _signalled(run, SIGNAL_AT_STEP, step=6)
    assert last.returncode == 128 + signal.SIGTERM, last.stderr[-2000:]
    assert last.stderr.count("\n") == 1, last.stderr
    saved = RunDir(run).checkpoint(6)
    assert f"SIGTERM at step 6, where training ended (max_steps): checkpoint {saved}" in last.stderr
    assert _scoring(run) in last.stderr and not (run / "results.json").exists()
    final = _signalled(run, FINAL_EVALUATION_SIGNAL, "--resume")
    assert final.returncode == 128 + signal.SIGTERM, final.stderr[-2000:]
    assert final.stderr.count("\n") == 1, final.stderr
    best = resolve(run)
    assert f"SIGTERM during the final evaluation: checkpoint {best} is saved" in final.stderr
    assert _scoring(run) in final.stderr and not (run / "results.json").exists()


@pytest.mark.slow
def test_a_signal_in_the_step_that_spends_the_time_budget_is_honoured(tmp_path):
    run = tmp_path / "run"
    spent = _signalled(run, TIME_RUNS_OUT, "--set", "train.max_minutes=1")
    assert spent.returncode == 128 + signal.SIGTERM, spent.stderr[-2000:]
    saved = RunDir(run).checkpoint(3)
    assert f"SIGTERM at step 3, where training ended (max_minutes): checkpoint {saved}" in (
        spent.stderr
    )


@pytest.mark.slow
def test_resume_names_a_checkpoint_and_a_damaged_one_is_not_called_format_1(tmp_path, tiny_run):
    """A checkpoint whose meta.json is gone, in a run that has one, is damaged (not format
    1): one line naming a checkpoint to continue from; --resume STEP continues from it,
    sets the later one aside, and ends as an uninterrupted run; bad names fail in one line."""
    from test_train_runs import assert_same_log, losses

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    (run / "checkpoints" / "step-0000006" / "meta.json").unlink()
    damaged = train(run, "--resume", check=False)
    assert damaged.returncode == 2 and damaged.stderr.count("\n") == 1, damaged.stderr[-2000:]
    assert "step-0000006 has no meta.json: it was damaged" in damaged.stderr
    assert "continue with --resume 3" in damaged.stderr and "format 1" not in damaged.stderr
    bad = train_here(run, "--resume", "99", check=False)
    assert bad.returncode == 2 and "complete ones are at steps 3, 6" in bad.stderr, bad.stderr
    with pytest.raises(CheckpointError, match="is not a checkpoint of"):
        resume_point(RunDir(run), str(tmp_path))
    resumed = train_here(run, "--resume", "3")
    assert "set aside the later step-0000006" in resumed.stdout
    assert (run / "checkpoints" / ".abandoned-step-0000006").is_dir()
    assert_same_log(losses(run), losses(tiny_run))
