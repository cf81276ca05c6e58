"""What machine a figure was measured on, in one line: the CUDA device's name when a GPU
is in use, else the CPU's model name (with its family and model numbers, which tell apart
processors that share a marketing name) and the threads torch may use. A run records it
in meta.json, so a report that pools runs from several machines can say which is which."""

from __future__ import annotations

import platform
from pathlib import Path

import torch


def cpu_name(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """/proc/cpuinfo's model name, family and model; platform's name where it is absent."""
    fields: dict[str, str] = {}
    try:
        for line in cpuinfo.read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    name = fields.get("model name") or platform.processor() or platform.machine() or "unknown CPU"
    if "cpu family" in fields and "model" in fields:
        name += f" (family {fields['cpu family']}, model {fields['model']})"
    return name


def describe(cuda: bool | None = None, threads: int | None = None) -> str:
    """The device a process computes on: 'NVIDIA H100 80GB HBM3' or 'AMD EPYC (family 26,
    model 2), 2 threads'. `cuda` defaults to whether a GPU is available."""
    if torch.cuda.is_available() if cuda is None else cuda:
        return torch.cuda.get_device_name()
    count = threads or torch.get_num_threads()
    return f"{cpu_name()}, {count} thread{'s' * (count != 1)}"
