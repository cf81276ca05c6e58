"""Operators dispatched per training step on CUDA's code path, t2 against the peer
(bench_train.py --count-ops).

An operator is an ATen call below autograd (forward, backward and the optimizer), counted
by a TorchDispatchMode over one step after a warm-up step; views (which launch no kernel)
are counted apart. On a CPU, t2 runs CUDA's code path (t2.model.codepath.simulated: no
packing, no blockwise loss, no CPU attention formula or dropout) and the peer runs Adam's
multi-tensor implementation, as PyTorch picks it on CUDA; PyTorch's own per-device choices
still follow the CPU, except F.rms_norm, which CUDA runs as one fused kernel each way
(PyTorch >= 2.8) and the CPU as a composition: simulated, it counts as CUDA runs it
(CudaFusions). On a GPU the step also runs under torch.profiler, which counts the CUDA
kernels it launches.
"""

from __future__ import annotations

import argparse
import contextlib
from collections import Counter
from dataclasses import replace

import torch
import torch.nn.functional as F  # noqa: N812
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from benchmarks.train_loops import MarianEngine, T2Engine, gpu_step, loader
from t2.config import Config
from t2.model.codepath import simulated
from t2.recipes import load_config


class Dispatched(TorchDispatchMode):
    """Counts every ATen operator dispatched within (none while `paused`)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter = Counter()
        self.paused = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        if not self.paused:
            self.calls[func] += 1
        return func(*args, **(kwargs or {}))


class _FusedOnCuda(torch.autograd.Function):
    """F.rms_norm as CUDA runs it (PyTorch >= 2.8: aten._fused_rms_norm forward and
    _fused_rms_norm_backward): counted as one operator each way, the same values."""

    @staticmethod
    def forward(ctx, counter, x, weight, eps):  # noqa: ANN001, ANN205
        ctx.counter, ctx.eps = counter, eps
        ctx.save_for_backward(x, weight)
        counter.calls["aten._fused_rms_norm (as on CUDA)"] += 1
        counter.paused += 1
        try:
            return F.rms_norm(x, (x.shape[-1],), weight, eps)
        finally:
            counter.paused -= 1

    @staticmethod
    def backward(ctx, grad):  # noqa: ANN001, ANN205
        x, weight = ctx.saved_tensors
        ctx.counter.calls["aten._fused_rms_norm_backward (as on CUDA)"] += 1
        ctx.counter.paused += 1
        try:
            with torch.enable_grad():
                x_, w_ = x.detach().requires_grad_(), weight.detach().requires_grad_()
                out = F.rms_norm(x_, (x.shape[-1],), w_, ctx.eps)
                gx, gw = torch.autograd.grad(out, (x_, w_), grad)
            return None, gx, gw, None
        finally:
            ctx.counter.paused -= 1


class CudaFusions(TorchFunctionMode):
    """Within a simulated CUDA path: F.rms_norm counted as CUDA dispatches it."""

    def __init__(self, counter: Dispatched) -> None:
        super().__init__()
        self.counter = counter

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        kwargs = kwargs or {}
        if func is F.rms_norm and torch.is_grad_enabled():
            x, shape, weight, eps = (*args, *kwargs.values())[:4]
            return _FusedOnCuda.apply(self.counter, x, weight, eps)
        return func(*args, **kwargs)


def step_ops(engine, cuda_path: bool) -> dict:  # noqa: ANN001
    """One counted step of `engine` after a warm-up step."""
    path = (
        simulated("cuda")
        if cuda_path and not torch.cuda.is_available()
        else (contextlib.nullcontext())
    )
    with path:
        engine.step()
        with (
            Dispatched() as mode,
            (
                CudaFusions(mode)
                if cuda_path and not torch.cuda.is_available()
                else contextlib.nullcontext()
            ),
        ):
            engine.step()
        kernels = gpu_step(engine)[0] if torch.cuda.is_available() else None
    views = sum(n for f, n in mode.calls.items() if getattr(f, "is_view", False))
    top = [(str(f), n) for f, n in mode.calls.most_common() if not getattr(f, "is_view", 0)]
    total = sum(mode.calls.values())
    as_cuda = {f: n for f, n in mode.calls.items() if isinstance(f, str)}
    casts = sum(n for f, n in mode.calls.items() if "_to_copy" in str(f))
    return {
        "ops": total - views,
        "ops_with_views": total,
        "kernels": kernels,
        "top": top[:12],
        "as_cuda": as_cuda,
        "casts": casts,
    }


def count_ops(cfg: Config, ds, args: argparse.Namespace, precision: str) -> dict:  # noqa: ANN001
    """t2's and the peer's operators per step on the same batches: a record's fields."""
    # eager: a dispatch mode sees every operator; a compiled graph's are fused away
    t2 = step_ops(T2Engine(cfg, ds, args, precision, mode="eager"), cuda_path=True)
    peer = step_ops(
        MarianEngine(cfg, ds, args, precision, loader(ds, args), foreach=True), cuda_path=False
    )
    where = "CUDA" if torch.cuda.is_available() else "CUDA's code path, simulated on a CPU"
    return {
        "ops_code_path": where,
        "ops_per_step": t2["ops"],
        "peer_ops_per_step": peer["ops"],
        "ops_per_step_with_views": t2["ops_with_views"],
        "peer_ops_per_step_with_views": peer["ops_with_views"],
        "kernels_per_step": t2["kernels"],
        "peer_kernels_per_step": peer["kernels"],
        "casts_per_step": t2["casts"],
        "peer_casts_per_step": peer["casts"],
        "top_ops": t2["top"],
        "peer_top_ops": peer["top"],
        "counted_as_on_cuda": t2["as_cuda"],
    }


def count_all(args: argparse.Namespace, ds, vocab: int, records: list[dict]) -> list[dict]:
    """--count-ops: each architecture's record (the timed one, if any) gains the counts."""
    print(
        f"\n{'recipe':16} {'prec':5} {'t2 ops/step':>12} {'peer ops/step':>14} {'ratio':>6}   "
        f"code path"
    )
    for recipe in args.recipes.split(","):
        cfg = load_config(recipe, args.set)
        cfg = replace(cfg, model=replace(cfg.model, vocab_size=vocab))
        for precision in args.precisions.split(","):
            counts = count_ops(cfg, ds, args, precision)
            found = [
                r
                for r in records
                if (r["recipe"], r.get("precision")) == (recipe, precision) and "ratio" in r
            ]
            if found:
                found[0].update(counts)
            else:
                records.append({"recipe": recipe, "precision": precision, **counts})
            print(
                f"{recipe:16} {precision:5} {counts['ops_per_step']:12} "
                f"{counts['peer_ops_per_step']:14} "
                f"{counts['ops_per_step'] / counts['peer_ops_per_step']:6.2f}   "
                f"{counts['ops_code_path']}",
                flush=True,
            )
    return records
