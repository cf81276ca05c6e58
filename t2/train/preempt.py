"""Preemption: SIGTERM (every scheduler's notice before it kills a job) and SIGUSR1 (SLURM's
`--signal=USR1@SECONDS`) during training end the run at an optimizer-step boundary with a
checkpoint of that step, as PyTorch Lightning does. One process stops at the step it is in;
several processes agree where they already synchronise (every train.log_every steps), so
they all save the same step. Under SLURM, SIGUSR1 also requeues the job (`scontrol
requeue`), and `--resume` continues it as if it had never stopped."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
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
        if threading.current_thread() is threading.main_thread():  # signals reach it only
            for sig in SIGNALS:
                self.before[sig] = signal.signal(sig, self._note)
        return self

    def __exit__(
        self, kind: type | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        for sig, handler in self.before.items():
            signal.signal(sig, handler)

    def _note(self, signum: int, frame: Any) -> None:
        self.received = signum

    def requested(self, step: int, accelerator: Any, log_every: int) -> bool:
        """Whether the run stops after `step`: with several processes, only at a logging
        step, and then if any of them received a signal."""
        if accelerator.num_processes == 1:
            return self.received is not None
        if step % log_every:
            return False
        flag = torch.tensor(float(self.received or 0), device=accelerator.device)
        torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
        self.received = int(flag.item()) or None
        return self.received is not None

    def finish(self, step: int, checkpoint: Any) -> None:
        """End the run in one line (a SLURM job that got SIGUSR1 is requeued first)."""
        assert self.received is not None
        name = signal.Signals(self.received).name
        requeued = ""
        job = os.environ.get("SLURM_JOB_ID")
        if self.received == signal.SIGUSR1 and job and shutil.which("scontrol"):
            done = subprocess.run(["scontrol", "requeue", job], capture_output=True, check=False)
            requeued = (
                f"; SLURM job {job} requeued"
                if done.returncode == 0
                else (f"; scontrol requeue {job} failed, requeue it by hand")
            )
        raise PreemptedError(
            f"{name} at step {step}: checkpoint {checkpoint} saved{requeued}; continue with "
            f"--resume",
            self.received,
        )
