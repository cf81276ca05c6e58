"""Which device's code path a tensor takes. t2 picks some kernels by device (packed states,
the blockwise loss, the CPU attention formula and dropout on a CPU; named SDPA backends on
CUDA): `code_path(t)` is the one place that asks, and `simulated("cuda")` makes CPU tensors
take CUDA's path, so that the path can be tested and its operators counted on a machine
without a GPU (benchmarks/bench_train.py --count-ops)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

_simulated: list[str] = []


def code_path(t: torch.Tensor) -> str:
    """ "cpu" or "cuda" (or another device type): the path `t`'s operations take."""
    return _simulated[-1] if _simulated else t.device.type


@contextlib.contextmanager
def simulated(kind: str) -> Iterator[None]:
    """Within: every tensor takes `kind`'s code path (its kernels still run where it is)."""
    _simulated.append(kind)
    try:
        yield
    finally:
        _simulated.pop()
