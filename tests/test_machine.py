"""The machine a run records (t2.machine): the CPU's name with its family and model from
/proc/cpuinfo, the threads, or the CUDA device's name (mocked here)."""

from __future__ import annotations

import platform

import torch

from t2.machine import cpu_name, describe

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 207
model name\t: Intel(R) Xeon(R) Processor
processor\t: 1
model name\t: Intel(R) Xeon(R) Processor
"""


def test_the_cpu_is_named_with_its_family_and_model(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(CPUINFO)
    assert cpu_name(info) == "Intel(R) Xeon(R) Processor (family 6, model 207)"
    info.write_text("processor\t: 0\nmodel name\t: Some ARM core\n")  # no family: name only
    assert cpu_name(info) == "Some ARM core"
    fallback = platform.processor() or platform.machine() or "unknown CPU"
    assert cpu_name(tmp_path / "absent") == fallback


def test_threads_and_the_cuda_device(monkeypatch):
    assert describe(cuda=False, threads=1) == f"{cpu_name()}, 1 thread"
    assert describe(cuda=False, threads=3) == f"{cpu_name()}, 3 threads"
    assert describe(cuda=False) == f"{cpu_name()}, {torch.get_num_threads()} thread" + (
        "s" * (torch.get_num_threads() != 1)
    )
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H100 80GB HBM3")
    assert describe(cuda=True) == "NVIDIA H100 80GB HBM3"
