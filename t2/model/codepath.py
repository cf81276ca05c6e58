"""Which device's code path a tensor takes. t2 picks some kernels by device (packed states,
the blockwise loss, the CPU attention formula and dropout on a CPU; named SDPA backends on
CUDA): `code_path(t)` is the one place that asks, and it answers the tensor's device type.

`simulated("cuda")` is a test and benchmark facility: within its `with` block, in the thread
that entered it, CPU tensors take CUDA's code path, so that the path can be tested and its
operators counted on a machine without a GPU (the tests, benchmarks/op_count.py and
benchmarks/bench_train.py --count-ops); training never enters it. The override is
thread-local and restored on exit, so blocks nest and other threads, one started inside the
block included, see their tensors' own devices. It is a `threading.local` rather than a
`ContextVar` because torch.compile traces `code_path` (tests compile CUDA's path under
`simulated`, fullgraph=True): Dynamo reads and guards a thread-local's attribute, and
recompiles when the override changes, but cannot trace `ContextVar.get`."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import torch

_override = threading.local()  # .kind: the simulated device type, in this thread only


def code_path(t: torch.Tensor) -> str:
    """ "cpu" or "cuda" (or another device type): the path `t`'s operations take."""
    kind = getattr(_override, "kind", None)
    return t.device.type if kind is None else kind


@contextlib.contextmanager
def simulated(kind: str) -> Iterator[None]:
    """Within, in this thread: every tensor takes `kind`'s code path (its kernels still run
    where it is); the enclosing kind, or none, is restored on exit."""
    outer = getattr(_override, "kind", None)
    _override.kind = kind
    try:
        yield
    finally:
        _override.kind = outer
