"""How long a process waits for the others. A training step's collectives (DDP's gradient
all-reduce, the logged sums, the preemption flag) give up after train.collective_timeout,
so a process that stops answering (a lost node, a stopped process) ends the others in one
line each, with a non-zero exit a scheduler can requeue, instead of holding them for
NCCL's 10 or gloo's 30 minutes. The waits while the main process works alone (cleaning
data, training the tokenizer, validating, saving, scoring the test split) go through a
second process group with a long timeout, so a slow validation is never taken for a loss."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from datetime import timedelta
from types import TracebackType
from typing import Any, TypeVar

import torch

from t2.errors import LostProcessError, T2Error
from t2.train.launch import elastic_restart

T = TypeVar("T")
SOLO_WORK = timedelta(hours=2)  # the longest the others wait for the main process alone


@contextlib.contextmanager
def rendezvous(timeout: timedelta) -> Iterator[None]:
    """Around the making of the process group (Accelerator()): after a restart by torchrun,
    the group is made here first (group_after_restart); other processes that never join
    within `timeout` end this one in one line."""
    group_after_restart(elastic_restart(), timeout)
    try:
        yield
    except (torch.distributed.DistStoreError, torch.distributed.DistNetworkError) as err:
        env = os.environ
        where = f"{env.get('MASTER_ADDR')}:{env.get('MASTER_PORT')}"
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:160]
        raise LostProcessError(
            f"process {env.get('RANK')} of {env.get('WORLD_SIZE')}: the others did not join "
            f"at {where} within train.collective_timeout={timeout.total_seconds():g} s "
            f"({reason}); start all of them (torchrun on every node, srun's tasks) with the "
            f"same MASTER_ADDR and MASTER_PORT"
        ) from None


def group_after_restart(restarts: int, timeout: timedelta) -> None:
    """After torchrun restarted the workers, the default process group, made on a part of
    torchrun's store of its own. The workers share the store of torchrun's rendezvous
    (TORCHELASTIC_USE_AGENT_STORE), which keeps the keys of the first start's group: a
    restarted worker reads the addresses of dead ones and fails to connect (gloo's
    "connection refused", NCCL's too: pytorch/pytorch#167288). Accelerate takes the group
    made here as it is; its backend is the one Accelerate picks for t2's devices."""
    env = os.environ
    if restarts == 0 or env.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return
    store = torch.distributed.TCPStore(
        env["MASTER_ADDR"], int(env["MASTER_PORT"]), is_master=False, timeout=timeout
    )
    torch.distributed.init_process_group(
        backend="nccl" if torch.cuda.is_available() else "gloo",
        store=torch.distributed.PrefixStore(f"t2-restart-{restarts}", store),
        rank=int(env["RANK"]),
        world_size=int(env["WORLD_SIZE"]),
        timeout=timeout,
    )


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
    def first(self, leader: bool) -> Iterator[None]:
        """The leaders (the main process, or one per node: t2.train.nodes) run the block
        first (e.g. write a cache), then the others."""
        if not leader:
            self.everyone()
        yield
        if leader:
            self.everyone()

    def from_main(self, value: T) -> T:
        """The main process's `value` (any picklable object), on every process."""
        if self.group is None:
            return value
        box = [value]
        torch.distributed.broadcast_object_list(box, src=0, group=self.group)
        return box[0]

    def gather(self, value: T) -> list[T]:
        """Every process's `value`, in rank order, on every process."""
        if self.group is None:
            return [value]
        values: list[Any] = [None] * self.accelerator.num_processes
        torch.distributed.all_gather_object(values, value, group=self.group)
        return values


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
