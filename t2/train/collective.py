"""How long a process waits for the others. A training step's collectives (DDP's gradient
all-reduce, the logged sums, the preemption flag) give up after train.collective_timeout,
so a process that stops answering (a lost node, a stopped process) ends the others in one
line each, with a non-zero exit a scheduler can requeue, instead of holding them for
NCCL's 10 or gloo's 30 minutes. The waits while the main process works alone (cleaning
data, training the tokenizer, validating, saving, scoring the test split) go through a
second process group with a long timeout, so a slow validation is never taken for a loss."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from datetime import timedelta
from types import TracebackType
from typing import Any

import torch

from t2.errors import LostProcessError, T2Error

SOLO_WORK = timedelta(hours=2)  # the longest the others wait for the main process alone


class Waits:
    """Barriers for the main process's solo work, on their own group (gloo, any device)."""

    def __init__(self, accelerator: Any) -> None:
        self.accelerator = accelerator
        self.group = None
        if accelerator.num_processes > 1:  # every process makes it here, in the same order
            self.group = torch.distributed.new_group(backend="gloo", timeout=SOLO_WORK)

    def everyone(self) -> None:
        """Wait until every process is here."""
        if self.group is not None:
            torch.distributed.barrier(group=self.group)

    @contextlib.contextmanager
    def main_first(self) -> Iterator[None]:
        """The main process runs the block first (e.g. writes a cache), then the others."""
        if not self.accelerator.is_main_process:
            self.everyone()
        yield
        if self.accelerator.is_main_process:
            self.everyone()


class LostProcess:
    """Around the training loop: a collective that failed after waiting
    train.collective_timeout since the step began (gloo raises it on the waiting process)
    becomes one line naming the timeout and the checkpoint to resume from. NCCL's own
    watchdog ends the process at the same timeout, before Python sees an error."""

    def __init__(self, accelerator: Any, timeout: float, latest: Any) -> None:
        self.accelerator, self.timeout, self.latest = accelerator, timeout, latest
        self.step, self.since = 0, time.monotonic()

    def mark(self, step: int) -> None:
        """A step begins (a host clock read: no device sync)."""
        self.step, self.since = step, time.monotonic()

    def __enter__(self) -> LostProcess:
        return self

    def __exit__(
        self, kind: type | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        waited = time.monotonic() - self.since
        if self.accelerator.num_processes == 1 or waited < self.timeout:
            return
        if not isinstance(err, RuntimeError) or isinstance(err, (T2Error, torch.OutOfMemoryError)):
            return
        ckpt = self.latest()
        then = (
            f"{ckpt} is intact: restart the job with --resume"
            if ckpt
            else ("no checkpoint was written yet: restart the job")
        )
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:160]
        raise LostProcessError(
            f"process {self.accelerator.process_index}: another process did not answer for "
            f"train.collective_timeout={self.timeout:g} s at step {self.step + 1} (a lost "
            f"node or a stopped process: {reason}); {then}"
        ) from None
