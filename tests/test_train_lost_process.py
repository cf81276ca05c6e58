"""A process of a two-process job (CPU, gloo) that stops answering: the other gives up
after train.collective_timeout with one line naming it and the intact checkpoint, exits
non-zero for the scheduler to requeue, and --resume continues the run."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from test_train_runs import ENV, ROOT, TINY

from t2.rundir import RunDir

TIMEOUT = 15  # seconds: train.collective_timeout in this test
STOP_AT_STEP = """
import os, runpy, signal, sys, time
import t2.train.loop as loop
step_fn, calls = loop.train_step, [0]
def stopped(*args, **kwargs):  # process 1 stops (SIGSTOP) as step N begins
    calls[0] += 1
    if os.environ["RANK"] == "1" and calls[0] == int(os.environ["T2_STOP_STEP"]):
        with open(os.environ["T2_STOPPED_AT"], "w") as f:
            f.write(str(time.time()))
        os.kill(os.getpid(), signal.SIGSTOP)
    step_fn(*args, **kwargs)
loop.train_step = stopped
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _command(out, *extra: str, python: list[str] | None = None) -> list[str]:
    sets = [arg for kv in (*TINY, "train.max_steps=6") for arg in ("--set", kv)]
    return [
        *(python or [sys.executable]),
        str(ROOT / "train.py"),
        "--recipe",
        "quickstart",
        "--out",
        str(out),
        "--wandb",
        "disabled",
        *sets,
        *extra,
    ]


def torchrun_env(rank: int, port: int) -> dict[str, str]:
    """What torchrun sets for process `rank` of two on one node."""
    return {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": "2",
        "LOCAL_WORLD_SIZE": "2",
    }


def _launch(
    run, *extra: str, program: str, env: dict[str, str], ranked=torchrun_env
) -> list[subprocess.Popen]:
    """Two processes of one job (gloo on CPU), as a launcher starts them: `ranked(rank,
    port)` is the environment it gives each (torchrun's by default)."""
    port, python = _free_port(), [sys.executable, "-c", program]
    procs = []
    for rank in (0, 1):
        procs.append(
            subprocess.Popen(
                _command(run, *extra, python=python),
                env={**ENV, **env, **ranked(rank, port)},
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    return procs


@pytest.mark.slow
def test_a_stopped_process_ends_the_other_after_the_timeout_in_one_line_and_resume_continues(
    tmp_path,
):
    run, stopped_at = tmp_path / "run", tmp_path / "stopped_at"
    env = {"T2_STOP_STEP": "5", "T2_STOPPED_AT": str(stopped_at)}
    survivor, stopped = _launch(
        run, "--set", f"train.collective_timeout={TIMEOUT}", program=STOP_AT_STEP, env=env
    )
    try:
        _, err = survivor.communicate(timeout=600)
        ended = time.time()
    finally:
        stopped.send_signal(signal.SIGKILL)  # a stopped process dies of SIGKILL alone
        stopped.communicate()
    assert stopped_at.is_file(), err[-3000:]
    waited = ended - float(stopped_at.read_text())
    assert TIMEOUT - 1 <= waited < TIMEOUT + 45, waited  # the timeout, not 30 minutes
    assert survivor.returncode == 2, err[-3000:]
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
    intact = RunDir(run).checkpoint(3)
    assert f"train.collective_timeout={TIMEOUT} s at step 5" in lines[0]
    assert f"{intact} is intact: restart the job with --resume" in lines[0]
    assert RunDir(run).latest() == intact
    again = subprocess.run(
        _command(run, "--resume"), env=ENV, cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert RunDir(run).latest().name == "step-0000006" and (run / "results.json").is_file()
    assert not os.path.exists(run / "checkpoints" / ".tmp-step-0000006")


SLOW_VALIDATION = """
import runpy, sys, time
import t2.train.loop as loop
validate = loop.validate
def slow(*args, **kwargs):  # the main process validates alone, for longer than the timeout
    time.sleep(8)
    return validate(*args, **kwargs)
loop.validate = slow
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.slow
def test_a_validation_longer_than_the_timeout_is_not_a_lost_process(tmp_path):
    """The others wait for the main process's solo work (here a validation of 8 s, with
    train.stop_exact_match asking every process after it) on the long-timeout group."""
    procs = _launch(
        tmp_path / "run",
        "--set",
        "train.collective_timeout=4",
        "--set",
        "train.stop_exact_match=1.0",
        program=SLOW_VALIDATION,
        env={},
    )
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
    assert (tmp_path / "run" / "results.json").is_file()
