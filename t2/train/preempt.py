"""Preemption: SIGTERM (every scheduler's notice before it kills a job) and SIGUSR1 (SLURM's
`--signal=USR1@SECONDS`) during training end the run at an optimizer-step boundary with a
checkpoint of that step, as PyTorch Lightning does; the last step is no exception (the
test split is then left to score). However the signal arrives (to the trainer, to its
process group, forwarded by torchrun, to every process of an srun step), it is the
trainer's: loader workers leave it to it (t2.data.loader). One process stops at the step
it is in. Several processes agree every few steps (CHECK_S, MOST_STEPS) and at the last
step, by an all-reduce of the signal on a gloo group of their own: a host-side exchange
that never waits for the GPU. They all save the same step; the main process says so in one
line. During the final evaluation a signal ends it at once, naming the checkpoint to score
later; before the first step, at once with nothing to save (BeforeTraining). Another
process gone meanwhile is one line too. Under SLURM, SIGUSR1 also requeues the job
(`scontrol requeue`, by the main process), and `--resume` continues it as if it had never
stopped."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

import torch

from t2.errors import LostProcessError, PreemptedError

SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


# several processes agree on a signal after about CHECK_S seconds of steps, and at most
# MOST_STEPS steps: an exchange costs a network round trip (0.5 ms between 2 processes of
# a 2-core host, docs/distributed.md; milliseconds across many nodes), under 1% of that,
# and the run stops well inside a scheduler's grace period (torchrun's --shutdown-timeout
# is 30 s by default)
CHECK_S = 1.0
MOST_STEPS = 8


class Preemption:
    """Catches SIGNALS while training (the handlers before are put back on exit). With
    several processes, an error after a signal (a process that torchrun or the scheduler
    already ended) is one line too."""

    def __init__(self, accelerator: Any, timeout: float, latest: Callable[[], Any]) -> None:
        self.received: int | None = None
        self.before: dict[int, Any] = {}
        self.processes = accelerator.num_processes
        self.timeout, self.latest = timeout, latest
        self.group: Any = None
        self.step = self.checked = 0
        self.next_check, self.since = 1, time.monotonic()

    def __enter__(self) -> Preemption:
        if self.processes > 1:  # every process makes it, at the same point
            wait = timedelta(seconds=self.timeout)  # a lost process: LostProcess's line
            self.group = torch.distributed.new_group(backend="gloo", timeout=wait)
        self.since = time.monotonic()
        self.before = _handle(self._note)
        return self

    def __exit__(
        self, kind: type | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        for sig, handler in self.before.items():
            signal.signal(sig, handler)
        if self.group is None or self.received is None or not isinstance(err, RuntimeError):
            return
        if not isinstance(err, torch.OutOfMemoryError):
            self._unsaved(err)

    def _note(self, signum: int, frame: Any) -> None:
        self.received = signum

    def requested(self, step: int, final: bool) -> bool:
        """Whether the run stops after `step`: with several processes, when they agree
        (every few steps, and at the `final` one, where they all stop), and then if any of
        them received a signal."""
        self.step = step
        if self.group is None:
            return self.received is not None
        if step < self.next_check and not final:
            return False
        now = time.monotonic()
        step_s = (now - self.since) / max(step - self.checked, 1)
        steps = min(MOST_STEPS, max(1, int(CHECK_S / max(step_s, 1e-9))))
        # each process's signal, and how many steps until the next exchange: the fewest
        votes = torch.tensor([float(self.received or 0), -float(steps)])
        torch.distributed.all_reduce(votes, op=torch.distributed.ReduceOp.MAX, group=self.group)
        self.next_check, self.checked, self.since = step - int(votes[1].item()), step, now
        agreed = int(votes[0].item())  # a signal since the vote is kept for the next one
        if agreed:
            self.received = agreed
        return agreed != 0

    def finish(
        self, step: int, checkpoint: Path, stopped_by: str | None, run: Path, main: bool
    ) -> None:
        """End the run in one line, said by the main process (a SLURM job that got SIGUSR1
        is requeued first). At the step where training ended (`stopped_by` a stop rule),
        the test split is not scored: the line says how to score it."""
        assert self.received is not None
        at = f"{signal.Signals(self.received).name} at step {step}"
        then = "continue with --resume"
        if stopped_by is not None:
            at += f", where training ended ({stopped_by})"
            then = f"{later_scoring(run)}, or finish the run with --resume"
        raise PreemptedError(
            f"{at}: checkpoint {checkpoint} saved{requeue(self.received, main)}; {then}",
            self.received,
            shown=main,
        )

    def _unsaved(self, err: BaseException) -> None:
        """A signal, then an error before the processes agreed: another process is gone
        (torchrun stopping the survivors of a failed one, a scheduler ending the job)."""
        assert self.received is not None
        latest = self.latest()
        then = f"{latest} is the latest" if latest else "no checkpoint yet"
        then += ": continue with --resume; under torchrun --max-restarts it restarts by itself"
        raise PreemptedError(
            f"{signal.Signals(self.received).name} after step {self.step}, and no checkpoint "
            f"of it: another process is gone ({first_words(err)}); {then}",
            self.received,
        ) from None


class BeforeTraining:
    """From the start of a run to its first step (the process group, the data's
    preparation, a checkpoint's restore): SIGNALS end it at once in one line, said by the
    main process, as there is nothing to save; with several processes, a collective that
    finds another process gone is one line naming it. Which process this is: the process
    group's rank once it is made, the launcher's RANK or SLURM_PROCID before."""

    def __init__(self) -> None:
        rank = os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0"))
        self.rank, self.processes = (int(rank) if rank.isdigit() else 0), 1
        self.before: dict[int, Any] = {}

    def _who(self) -> tuple[int, int]:
        """This process's rank and the number of processes."""
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            return torch.distributed.get_rank(), torch.distributed.get_world_size()
        return self.rank, self.processes

    def __enter__(self) -> BeforeTraining:
        self.before = _handle(self._stop)
        return self

    def _stop(self, signum: int, frame: Any) -> None:
        raise PreemptedError(
            f"{signal.Signals(signum).name} before the first step: nothing to save; start again",
            signum,
            shown=self._who()[0] == 0,
        )

    def __exit__(
        self, kind: type | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        for sig, handler in self.before.items():
            signal.signal(sig, handler)
        rank, processes = self._who()
        if processes == 1 or not isinstance(err, RuntimeError) or tb is None:
            return
        if isinstance(err, torch.OutOfMemoryError) or not _in_torch_distributed(tb):
            return
        lost = f"process {1 - rank}" if processes == 2 else "another process"
        raise LostProcessError(
            f"process {rank}: {lost} is gone before the first step ({first_words(err)}): "
            "start the job again, every process (--resume where it resumed)"
        ) from None


def _in_torch_distributed(tb: TracebackType) -> bool:
    """Whether the error was raised in torch.distributed (a collective), not by t2."""
    while tb.tb_next is not None:
        tb = tb.tb_next
    folder = Path(torch.distributed.__file__).parent
    return Path(tb.tb_frame.f_code.co_filename).is_relative_to(folder)


def later_scoring(run: Path) -> str:
    return f"score it on the test split with `t2 evaluate --checkpoint {run}`"


@contextlib.contextmanager
def ends_at_once(
    what: str, saved: Path, run: Path, main: bool, wait: Callable[[], None] | None
) -> Iterator[None]:
    """SIGNALS during `what` (the final evaluation, which has no step boundary to wait for)
    end it where it is, in one line (said by the `main` process) naming the `saved`
    checkpoint and how to score it. `wait` (for every process) ends the block: another
    process gone meanwhile (signalled alone, or killed) is one line too."""
    then = f"{later_scoring(run)}, or --resume to score it again"

    def stop(signum: int, frame: Any) -> None:
        raise PreemptedError(
            f"{signal.Signals(signum).name} during {what}: checkpoint {saved} is saved"
            f"{requeue(signum, main)}; {then}",
            signum,
            shown=main,
        )

    before = _handle(stop)
    try:
        yield
        if wait is not None:
            try:
                wait()
            except RuntimeError as err:
                if isinstance(err, torch.OutOfMemoryError):
                    raise
                raise LostProcessError(
                    f"another process is gone during {what} ({first_words(err)}): "
                    f"checkpoint {saved} is saved; {then}"
                ) from None
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def first_words(err: BaseException, most: int = 160) -> str:
    """An error's first line, for a line of ours: its first sentence, or its first `most`
    characters cut at a word and marked so."""
    line = (str(err).strip().splitlines() or [type(err).__name__])[0].strip()
    end = line.find(". ")
    if 0 < end < most:
        return line[:end]
    if len(line) <= most:
        return line.rstrip(".")
    return line[:most].rsplit(" ", 1)[0].rstrip(" .,;:") + " …"


def _handle(handler: Any) -> dict[int, Any]:
    """Install `handler` for SIGNALS; the handlers before it. Signals reach the main thread
    only: elsewhere (a test's thread) nothing is installed."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.signal(sig, handler) for sig in SIGNALS}


def requeue(signum: int, main: bool) -> str:
    """Under SLURM, SIGUSR1 requeues the job (once: by the main process); what to add to
    the line that ends the run."""
    job = os.environ.get("SLURM_JOB_ID")
    if signum != signal.SIGUSR1 or not job or not main or not shutil.which("scontrol"):
        return ""
    done = subprocess.run(["scontrol", "requeue", job], capture_output=True, check=False)
    if done.returncode == 0:
        return f"; SLURM job {job} requeued"
    return f"; scontrol requeue {job} failed, requeue it by hand"
