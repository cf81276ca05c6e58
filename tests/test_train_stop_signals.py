"""A stop signal gives a checkpoint however it arrives: to the trainer's process group (its
loader worker too), through torchrun, to every process of a two-process job (srun's way).
Each is sent by a `kill` from outside the job as process 0 ends step 5, with a loader
worker in each process (train.loader_workers=1); the run ends within a few steps of the
signal reaching the trainers (the processes agree every few steps, t2.train.preempt;
torchrun's forwarding comes first, so there the bound is in seconds), in one line, exit
128 + SIGTERM. To the
trainer's pid alone: test_train_resume.py::test_a_preempted_run_saves_its_step_…"""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from benchmarks.stop_signal import (
    ROOT,
    SENDER,
    TINY,
    every_process,
    signal_env,
    timed,
    train_command,
)
from t2.rundir import RunDir
from t2.train.preempt import MOST_STEPS

AT_STEP = 5
STOPPED = 128 + signal.SIGTERM


def _one_line(stderr: str, run) -> int:
    """The step saved, from the one `error:` line (a SIGTERM at step N, its checkpoint)."""
    lines = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr[-3000:]
    step = RunDir(run).latest()
    assert step is not None, stderr[-3000:]
    saved = int(step.name.split("-")[1])
    assert lines[0] == (
        f"error: SIGTERM at step {saved}: checkpoint {step} saved; continue with --resume"
    ), lines[0]
    return saved


@pytest.mark.slow
def test_sigterm_to_the_process_group_with_a_loader_worker_saves(tmp_path):
    """One process and its loader worker, in a group of their own (a terminal's, a batch
    script's): the worker leaves the signal to the trainer, which saves the step it is in.
    Before: the worker died of it (`DataLoader worker ... is killed by signal`), exit 1."""
    run = tmp_path / "run"
    cut = subprocess.run(
        train_command(run, TINY, [sys.executable, "-c", SENDER]),
        env=signal_env(run, AT_STEP, "group"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        start_new_session=True,
    )
    assert cut.returncode == STOPPED, cut.stderr[-3000:]
    assert cut.stderr.count("\n") == 1, cut.stderr[-3000:]
    assert AT_STEP <= _one_line(cut.stderr, run) <= AT_STEP + MOST_STEPS


@pytest.mark.slow
def test_sigterm_to_torchrun_saves_and_torchrun_ends_without_a_traceback(tmp_path):
    """`python -m t2.torchrun` (torchrun's arguments) given SIGTERM by killpg, as a
    scheduler stops it: torchrun forwards it to each worker's group (the trainer and its
    loader worker), both save the same step, the main process says so in one line and
    torchrun adds its log lines but no traceback; exit 143. Before: the workers died of
    their loader workers' deaths and torchrun ended in a SignalException traceback."""
    run, sender = tmp_path / "run", tmp_path / "sender.py"
    sender.write_text(SENDER)
    launcher = [sys.executable, "-m", "t2.torchrun", "--standalone", "--nproc-per-node", "2"]
    cut = subprocess.run(
        train_command(run, TINY, [*launcher, str(sender)]),
        env=signal_env(run, AT_STEP, "launcher"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        start_new_session=True,  # torchrun leads a group of its own, as under a scheduler
    )
    assert cut.returncode == STOPPED, cut.stderr[-3000:]
    saved, sent = _one_line(cut.stderr, run), timed(run, run.with_name("run.sent"))
    # torchrun's own handling and forwarding come first: bound in seconds, not steps
    assert AT_STEP <= saved < 40 and sent["saved"] == saved, sent  # 40: the last step
    assert 0 < sent["seconds"] < 30, sent  # inside torchrun's default --shutdown-timeout


@pytest.mark.slow
def test_sigterm_to_every_process_of_a_job_saves_within_a_few_steps(tmp_path):
    """Two srun tasks, both trainers and both loader workers signalled (SLURM signals every
    process of a step), with train.log_every=100: they agree within MOST_STEPS steps, not at
    the next logging step, and save that step; the main process says so in one line, the
    other in none. Before: the loader workers died and took the trainers with them, no
    checkpoint. benchmarks/stop_signal.py measures the same thing over rounds."""
    run = tmp_path / "run"
    job = every_process(run, AT_STEP)
    assert job["exit"] == [STOPPED, STOPPED], job["stderr"]
    main, other = job["stderr"]
    assert main.count("\n") == 1 and other == "", job["stderr"]
    saved = _one_line(main, run)
    assert job["sent_after"] == AT_STEP and job["saved"] == saved
    assert 0 <= job["steps"] <= MOST_STEPS + 1, job
    assert 0 < job["seconds"] < 30, job  # inside torchrun's default --shutdown-timeout


class _Clock:
    """preempt's clock: `step_s` seconds a step."""

    def __init__(self, step_s: float) -> None:
        self.now, self.step_s = 0.0, step_s

    def monotonic(self) -> float:
        return self.now


def _two_processes(monkeypatch, step_s: float, during=None):  # noqa: ANN001, ANN202
    """A Preemption of process 0 of two whose partner votes nothing: the steps it exchanges
    votes at (the all-reduce stubbed; `during(preempt)` runs inside it, as a signal can)."""
    from types import SimpleNamespace

    from t2.train import preempt as module

    clock, exchanged = _Clock(step_s), []
    monkeypatch.setattr(module, "time", clock)
    acc = SimpleNamespace(num_processes=2, is_main_process=True)
    preempt = module.Preemption(acc, 30, lambda: None)
    preempt.group = "gloo"  # what __enter__ makes; the stub below never uses it

    def all_reduce(votes, op, group):  # noqa: ANN001, ANN202
        exchanged.append(preempt.step)
        if during is not None:
            during(preempt)

    monkeypatch.setattr(module.torch.distributed, "all_reduce", all_reduce)
    return preempt, clock, exchanged


def test_processes_exchange_votes_every_second_of_steps_and_at_most_every_8(monkeypatch):
    for step_s, every in ((0.01, MOST_STEPS), (0.3, 3), (2.0, 1)):
        preempt, clock, exchanged = _two_processes(monkeypatch, step_s)
        for step in range(1, 40):
            clock.now += step_s
            assert not preempt.requested(step, final=step == 39)
        assert exchanged[:3] == [1, 1 + every, 1 + 2 * every], (step_s, exchanged)
        assert exchanged[-1] == 39  # the last step: always


def test_a_signal_during_the_exchange_is_kept_for_the_next(monkeypatch):
    """The handler runs as the all-reduce returns (Python runs it between bytecodes): the
    vote sent was none, so the processes go on, and the next exchange stops them. Before:
    the result overwrote the signal and the run trained on (2 runs in 5 of a 2-process job
    with 0.3 s steps)."""
    calls = []

    def signal_once(preempt) -> None:  # noqa: ANN001
        calls.append(1)
        if len(calls) == 1:
            preempt._note(signal.SIGTERM, None)

    preempt, clock, _ = _two_processes(monkeypatch, 2.0, during=signal_once)
    clock.now += 2.0
    assert not preempt.requested(1, final=False)  # every process voted none
    clock.now += 2.0
    assert preempt.requested(2, final=False) and preempt.received == signal.SIGTERM


def _torchrun_argv(monkeypatch, argv: list[str]) -> list[str]:
    """The arguments `python -m t2.torchrun ARGV` hands torchrun (torchrun stubbed)."""
    import torch.distributed.run

    from t2 import torchrun

    given: list[list[str]] = []
    monkeypatch.setattr(torch.distributed.run, "main", given.append)
    torchrun.main(argv)
    return given[0]


def test_t2_torchrun_makes_torchrun_handle_sigusr1(monkeypatch):
    """SLURM's --signal=USR1@SECONDS reaches torchrun: torch's torchrun handles SIGTERM,
    SIGINT, SIGHUP and SIGQUIT only, so SIGUSR1 killed it (-10) and its workers, in sessions
    of their own, trained on with no checkpoint. A user's own --signals-to-handle is kept."""
    script = ["--nproc-per-node", "2", "train.py", "--recipe", "base"]
    argv = _torchrun_argv(monkeypatch, script)
    assert argv == ["--signals-to-handle", "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1", *script]
    for own in (["--signals-to-handle", "SIGTERM"], ["--signals_to_handle=SIGTERM"]):
        assert _torchrun_argv(monkeypatch, [*own, *script]) == [*own, *script]
    # a script's own argument of that name is the script's
    tail = ["train.py", "--signals-to-handle", "x"]
    assert _torchrun_argv(monkeypatch, tail)[:2] == [
        "--signals-to-handle",
        "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1",
    ]


def test_t2_torchrun_says_so_where_torchrun_cannot_handle_sigusr1(monkeypatch, capsys):
    import argparse

    import torch.distributed.run

    monkeypatch.setattr(torch.distributed.run, "get_args_parser", argparse.ArgumentParser)
    assert _torchrun_argv(monkeypatch, ["train.py"]) == ["train.py"]
    assert capsys.readouterr().err.count("\n") == 1


GLOO_LOST = (
    "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed "
    "by peer [127.0.0.1]:30116. This is typically caused by a remote worker crashing."
)


def test_a_signal_during_the_final_evaluation_is_said_by_the_main_process_only(tmp_path):
    """The whole job signalled while the main process scores the test split: every process
    stops with the same line, shown by the main process only. Before: both printed it."""
    import os

    from t2.errors import PreemptedError
    from t2.train.preempt import ends_at_once

    for main in (True, False):
        evaluation = ends_at_once("the final evaluation", tmp_path / "best", tmp_path, main, None)
        with pytest.raises(PreemptedError) as stop, evaluation:
            os.kill(os.getpid(), signal.SIGTERM)
            signal.sigtimedwait([], 0)  # a bytecode boundary: the handler has run
        assert stop.value.exit_status == STOPPED and stop.value.shown is main
        assert str(stop.value).startswith("SIGTERM during the final evaluation: checkpoint")


def test_a_process_gone_during_the_final_evaluation_is_one_line(tmp_path):
    """Process 0 signalled while process 1 waits for it to finish scoring: process 1's wait
    fails (gloo: Connection closed by peer); one line, not a 14-line traceback. An error in
    the scoring itself stays what it is."""
    from t2.errors import LostProcessError
    from t2.train.preempt import ends_at_once

    def wait() -> None:
        raise RuntimeError(GLOO_LOST)

    with (
        pytest.raises(LostProcessError) as lost,
        ends_at_once("the final evaluation", tmp_path / "best", tmp_path, False, wait),
    ):
        pass
    line = str(lost.value)
    assert "\n" not in line and "another process is gone during the final evaluation" in line
    assert "Connection closed by peer" in line and f"t2 evaluate --checkpoint {tmp_path}" in line
    with (
        pytest.raises(RuntimeError, match="scoring"),
        ends_at_once("the final evaluation", tmp_path / "best", tmp_path, True, wait),
    ):
        raise RuntimeError("scoring")


def test_a_signal_before_the_first_step_ends_the_run_in_one_line():
    """SIGTERM during the set-up (the data's preparation, before step 1): nothing to save,
    exit 143 in one line, said by the main process. Before: the process died of it (-15),
    silent, and the other process of the job ended in gloo's traceback."""
    import os

    from t2.errors import PreemptedError
    from t2.train.preempt import BeforeTraining

    for main in (True, False):
        setup = BeforeTraining()
        setup.rank = 0 if main else 1
        with pytest.raises(PreemptedError) as stop, setup:
            os.kill(os.getpid(), signal.SIGTERM)
            signal.sigtimedwait([], 0)
        assert str(stop.value) == "SIGTERM before the first step: nothing to save; start again"
        assert stop.value.exit_status == STOPPED and stop.value.shown is main
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # put back


def test_a_process_lost_in_a_collective_during_set_up_is_one_line():
    """Process 0 gone while process 1 waits in a barrier of the set-up: one line naming it
    and what to do. An error of the set-up itself (not in a collective) stays what it is."""
    import torch.distributed

    from t2.errors import LostProcessError
    from t2.train.preempt import BeforeTraining

    def barrier() -> None:  # raises as gloo's does, from inside torch.distributed
        raise RuntimeError(GLOO_LOST)

    barrier.__code__ = barrier.__code__.replace(co_filename=torch.distributed.__file__)
    setup = BeforeTraining()
    setup.rank, setup.processes = 1, 2  # the process group's, where it is made
    with pytest.raises(LostProcessError) as lost, setup:
        barrier()
    line = str(lost.value)
    assert "\n" not in line and line.startswith("process 1: process 0 is gone before the first")
    assert "Connection closed by peer [127.0.0.1]:30116" in line and "start the job" in line
    with pytest.raises(RuntimeError, match="a bug"), setup:
        raise RuntimeError("a bug")


def test_a_signal_then_a_lost_process_names_the_reason_whole_and_both_ways_on(monkeypatch):
    """_unsaved's reason: gloo's first sentence, not its first 160 characters cut in a word;
    the advice holds under torchrun's elastic restarts too. Before: `... Connection closed
    by peer [127.0.0.1]:30116. This is typically caused by a remote wo` and `restart it`."""
    from t2.errors import PreemptedError

    for latest in (None, "RUN/checkpoints/step-0000003"):
        preempt, _, _ = _two_processes(monkeypatch, 0.1)
        preempt.latest, preempt.step = (lambda latest=latest: latest), 4
        preempt._note(signal.SIGTERM, None)
        with pytest.raises(PreemptedError) as stop:
            preempt._unsaved(RuntimeError(GLOO_LOST + " Check the logs of the remote worker."))
        line = str(stop.value)
        assert "Connection closed by peer [127.0.0.1]:30116)" in line, line
        assert line.endswith(
            "continue with --resume; under torchrun --max-restarts it restarts by itself"
        ), line
        assert (latest is None) is ("no checkpoint yet" in line), line


def test_first_words_cuts_at_a_sentence_or_a_word():
    from t2.train.preempt import first_words

    assert first_words(RuntimeError("one. two")) == "one"
    assert first_words(RuntimeError("x" * 10 + " " + "y" * 200)) == "x" * 10 + " …"
    assert first_words(RuntimeError("short\nmore")) == "short"
