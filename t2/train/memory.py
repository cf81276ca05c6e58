"""A step that runs out of memory ends the run in one line: the micro-batch, the memory
the batch plan counted on and the memory the device has, the key to change, and the
checkpoint to resume from (training writes nothing while a step runs, so it is intact)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from t2.config import Config
from t2.errors import T2Error
from t2.rundir import RunDir


def available() -> str:
    """The device's memory, measured now: on CUDA its total and what is free after the
    failure (the caching allocator's cache emptied first); on a CPU the machine's RAM."""
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        free, total = torch.cuda.mem_get_info()
        return f"the GPU has {total / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free now"
    try:
        import psutil

        total, free = psutil.virtual_memory().total, psutil.virtual_memory().available
        return f"the machine has {total / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free now"
    except ImportError:  # pragma: no cover - psutil comes with accelerate
        return "free memory unknown"


@contextlib.contextmanager
def out_of_memory(
    cfg: Config, step: int, planned_bytes: int | None = None, run_dir: RunDir | None = None
) -> Iterator[None]:
    """The device's out-of-memory error as one line; the sampler runs an epoch's largest
    batch first, so a plan that does not fit fails at once."""
    try:
        yield
    except torch.OutOfMemoryError:
        tokens, acc = cfg.data.max_tokens, cfg.train.accumulate
        plan = ""
        if planned_bytes:
            plan = f"{planned_bytes / 2**30:.1f} GiB planned by the memory model; "
        latest = run_dir.latest() if run_dir is not None else None
        resume = "; no checkpoint was saved yet"
        if latest is not None:
            resume = f"; checkpoint {latest} is intact: --resume continues from it"
        raise T2Error(
            f"out of memory at step {step + 1} with micro-batches of data.max_tokens={tokens} "
            f"({plan}{available()}); lower it (e.g. --set data.max_tokens={max(tokens // 2, 1)} "
            f"--set train.accumulate={2 * acc}) or data.max_tokens_per_sentence{resume}"
        ) from None
