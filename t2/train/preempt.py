"""Preemption: SIGTERM (every scheduler's notice before it kills a job) and SIGUSR1 (SLURM's
`--signal=USR1@SECONDS`) during training end the run at an optimizer-step boundary with a
checkpoint of that step, as PyTorch Lightning does; the last step is no exception (the
test split is then left to score). One process stops at the step it is in; several
processes agree where they already synchronise (every train.log_every steps, and the last
step), so they all save the same step. During the final evaluation a signal ends it at
once, naming the checkpoint to score later. Under SLURM, SIGUSR1 also requeues the job
(`scontrol requeue`, by the main process), and `--resume` continues it as if it had never
stopped."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import torch

from t2.errors import PreemptedError

SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


class Preemption:
    """Catches SIGNALS while training (the handlers before are put back on exit)."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.before: dict[int, Any] = {}

    def __enter__(self) -> Preemption:
        self.before = _handle(self._note)
        return self

    def __exit__(
        self, kind: type | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        for sig, handler in self.before.items():
            signal.signal(sig, handler)

    def _note(self, signum: int, frame: Any) -> None:
        self.received = signum

    def requested(self, step: int, accelerator: Any, log_every: int, final: bool) -> bool:
        """Whether the run stops after `step`: with several processes, only at a logging
        step or the `final` one (where they all stop), and then if any of them received a
        signal."""
        if accelerator.num_processes == 1:
            return self.received is not None
        if step % log_every and not final:
            return False
        flag = torch.tensor(float(self.received or 0), device=accelerator.device)
        torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
        self.received = int(flag.item()) or None
        return self.received is not None

    def finish(
        self, step: int, checkpoint: Path, stopped_by: str | None, run: Path, main: bool
    ) -> None:
        """End the run in one line (a SLURM job that got SIGUSR1 is requeued first). At
        the step where training ended (`stopped_by` a stop rule), the test split is not
        scored: the line says how to score it."""
        assert self.received is not None
        at = f"{signal.Signals(self.received).name} at step {step}"
        then = "continue with --resume"
        if stopped_by is not None:
            at += f", where training ended ({stopped_by})"
            then = f"{later_scoring(run)}, or finish the run with --resume"
        raise PreemptedError(
            f"{at}: checkpoint {checkpoint} saved{requeue(self.received, main)}; {then}",
            self.received,
        )


def later_scoring(run: Path) -> str:
    return f"score it on the test split with `t2 evaluate --checkpoint {run}`"


@contextlib.contextmanager
def ends_at_once(what: str, saved: str, run: Path, main: bool) -> Iterator[None]:
    """SIGNALS during `what` (the final evaluation, which has no step boundary to wait for)
    end it where it is, in one line naming the `saved` checkpoint and how to score it."""

    def stop(signum: int, frame: Any) -> None:
        raise PreemptedError(
            f"{signal.Signals(signum).name} during {what}: checkpoint {saved} is saved"
            f"{requeue(signum, main)}; {later_scoring(run)}, or --resume to score it again",
            signum,
        )

    before = _handle(stop)
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


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
