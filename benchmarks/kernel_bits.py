"""The exact bits each of base's and v2's components computes on fixed inputs, one hash a
line, so that two machines (or two kernel levels of one: ATEN_CPU_CAPABILITY=default and
avx2) can be compared: a component whose hash differs does not compute the same floats
there, and a model trained through it drifts apart (docs/results/report004.md: why base's
seeds 1 to 4 differ between the Intel and the AMD sweep and v2's do not, still unexplained).

    python -m benchmarks.kernel_bits
    ATEN_CPU_CAPABILITY=default python -m benchmarks.kernel_bits

Inputs come from NumPy's generator, whose bits do not depend on the machine (PyTorch's
randn is vectorized and does); one thread, float32, forward and backward.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812

from t2.model.fused import rms_norm
from t2.model.positional.rope import rope_tables
from t2.model.positional.sinusoidal import sinusoid_table

ROWS, LENGTH, WIDTH = 64, 37, 256


def digest(*tensors: torch.Tensor) -> str:
    found = hashlib.sha1()
    for t in tensors:
        found.update(t.detach().contiguous().numpy().tobytes())
    return found.hexdigest()[:10]


def _normal(rng: np.random.Generator, *shape: int) -> torch.Tensor:
    return torch.from_numpy(rng.standard_normal(shape).astype(np.float32))


def _through(
    fn: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    grad: torch.Tensor,
    *params: torch.Tensor,
) -> str:
    x = x.clone().requires_grad_()
    y = fn(x)
    y.backward(grad)
    return digest(y, x.grad, *(p.grad for p in params))


def kernel_bits() -> dict[str, str]:
    """component -> the hash of its output and gradients on fixed inputs."""
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    x, grad = _normal(rng, ROWS, LENGTH, WIDTH), _normal(rng, ROWS, LENGTH, WIDTH)
    layernorm = torch.nn.LayerNorm(WIDTH)
    weight = torch.nn.Parameter(torch.ones(WIDTH))
    linear = torch.nn.Linear(WIDTH, WIDTH)
    with torch.no_grad():
        linear.weight.copy_(_normal(rng, WIDTH, WIDTH) * 0.05)
        linear.bias.copy_(_normal(rng, WIDTH) * 0.05)
    return {
        "layernorm (base)": _through(layernorm, x, grad, layernorm.weight, layernorm.bias),
        "t2 rmsnorm (v2)": _through(lambda t: rms_norm(t, weight, 1e-5), x, grad, weight),
        "relu (base)": _through(F.relu, x, grad),
        "silu (v2's swiglu)": _through(F.silu, x, grad),
        "softmax (both)": _through(lambda t: torch.softmax(t, -1), x, grad),
        "linear (both)": _through(linear, x, grad, linear.weight, linear.bias),
        "sinusoidal table (base)": digest(sinusoid_table(1024, WIDTH)),
        "rope tables (v2)": digest(*rope_tables(1024, WIDTH // 4, 10000.0)),
    }


def main() -> None:
    print(f"torch {torch.__version__}, kernels {torch.backends.cpu.get_cpu_capability()}")
    for name, found in kernel_bits().items():
        print(f"{name:24s} {found}")


if __name__ == "__main__":
    main()
