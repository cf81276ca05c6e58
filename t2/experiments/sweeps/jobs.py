"""Runs packed onto the machine (`t2 sweep --jobs N`): N training processes at once, each
pinned to its share. With GPUs, a run sees one GPU (CUDA_VISIBLE_DEVICES), and
`--runs-per-gpu K` puts K runs on each (a Multi30k-sized model uses a small part of a
modern card); on a CPU, the cores are split into N equal, disjoint sets: each run is
bound to its set (sched_setaffinity) and uses that many threads (OMP_NUM_THREADS)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from t2.errors import ConfigError


@dataclass(frozen=True)
class Slot:
    """Where one of the N concurrent runs goes: its environment and its CPU cores."""

    env: dict[str, str]
    cores: tuple[int, ...]

    def pin(self) -> None:
        """In the child process, before it runs: bind it to its cores."""
        if self.cores and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, self.cores)


def slots(jobs: int, gpus: int, cores: list[int], per_gpu: int = 1) -> list[Slot]:
    """The N slots: one GPU each (per_gpu runs per GPU), else an equal split of `cores`."""
    if jobs < 1 or per_gpu < 1:
        raise ConfigError(f"--jobs {jobs} and --runs-per-gpu {per_gpu} must be at least 1")
    if gpus:
        if jobs > gpus * per_gpu:
            raise ConfigError(
                f"--jobs {jobs} is more than {gpus} GPU(s) x --runs-per-gpu {per_gpu}; "
                f"lower --jobs or raise --runs-per-gpu"
            )
        share = max(1, len(cores) // jobs)
        return [
            Slot({"CUDA_VISIBLE_DEVICES": str(i // per_gpu), "OMP_NUM_THREADS": str(share)}, ())
            for i in range(jobs)
        ]
    if jobs > len(cores):
        raise ConfigError(f"--jobs {jobs} is more than the {len(cores)} CPU cores; lower --jobs")
    share = len(cores) // jobs
    return [
        Slot(
            {"OMP_NUM_THREADS": str(share), "CUDA_VISIBLE_DEVICES": ""},
            tuple(cores[i * share : (i + 1) * share]),
        )
        for i in range(jobs)
    ]


def machine() -> tuple[int, list[int]]:
    """This machine's GPUs and the CPU cores this process may use."""
    import torch  # a heavy import, only when a sweep trains

    cores = (
        sorted(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else list(range(os.cpu_count() or 1))
    )
    return torch.cuda.device_count(), cores
