"""Which calls in a training step make the host wait for the accelerator: reading a device
tensor's value (`.item()`, `.tolist()`, `bool(t)`, ...), copying it to the host, or an
operator whose output size depends on its values (`nonzero`). Checked on a CPU, where
nothing waits, by following which tensors would live on the device."""

from __future__ import annotations

import sys
from collections.abc import Iterable

import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves
from torch.utils.weak import WeakIdKeyDictionary

# reading any of these on a device tensor waits for the device (a host sync)
READS = {
    Tensor.item,
    Tensor.tolist,
    Tensor.numpy,
    Tensor.__bool__,
    Tensor.__int__,
    Tensor.__float__,
    Tensor.__index__,
    Tensor.nonzero,
    torch.nonzero,
}
# copies: host -> device is a transfer (its output is a device tensor), device -> host a sync
COPIES = {Tensor.to, Tensor.cuda, Tensor.cpu}


class HostSyncs(TorchFunctionMode):
    """Records, in `calls`, each host sync made while it is active: a READS call, or a copy
    to the host, on a device tensor. The device tensors are those given (the model's
    parameters, whose gradients follow as they accumulate), each copy of a host tensor to
    a device (the batch the step moves; on a CPU, `.to("cpu")` returns a new tensor, as a
    real transfer would), each tensor made with an explicit `device=`, and every output of
    an operator that read one of them. The loader's host batch is no device tensor: reading
    it (`int(batch["seed"])`) is no sync."""

    def __init__(self, device_tensors: Iterable[Tensor] = ()) -> None:
        super().__init__()
        self.calls: list[str] = []
        self._device = WeakIdKeyDictionary()
        self._hooks = []
        for t in device_tensors:
            self._device[t] = True
            if t.requires_grad:
                self._hooks.append(t.register_post_accumulate_grad_hook(self._mark_grad))

    def _mark_grad(self, p: Tensor) -> None:
        self._device[p.grad] = True

    def __exit__(self, *exc) -> None:
        for h in self._hooks:
            h.remove()
        return super().__exit__(*exc)

    def on_device(self, x: object) -> bool:
        return isinstance(x, Tensor) and x in self._device

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        read = any(self.on_device(a) for a in tree_leaves((args, kwargs)))
        if func in COPIES and args and isinstance(args[0], Tensor):
            return self._copy(func, args, kwargs)
        if read and func in READS:
            self.calls.append(f"{_name(func)} at {_caller()}")
        out = func(*args, **kwargs)
        made = kwargs.get("device")
        if read or (made is not None and not _names_host(made)):
            for t in tree_leaves(out):
                if isinstance(t, Tensor):
                    self._device[t] = True
        return out

    def _copy(self, func, args, kwargs):  # noqa: ANN001
        src, out = args[0], func(*args, **kwargs)
        if func is Tensor.to:
            given = [
                a for a in (*args[1:], kwargs.get("device")) if isinstance(a, str | torch.device)
            ]
            target = given[0] if given else None
        else:
            target = "cpu" if func is Tensor.cpu else torch.device("cuda")
        if target is None:  # a cast, not a copy: it stays where it was
            if self.on_device(src):
                self._device[out] = True
        elif _names_host(target):
            if self.on_device(src):
                self.calls.append(f"{_name(func)} to the host at {_caller()}")
        else:
            if out is src and not self.on_device(src):  # a CPU stands in for the device:
                out = src.clone()  # the copy is a new tensor there too, as a transfer's is
            self._device[out] = True
        return out


def _names_host(device: str | torch.device) -> bool:
    """Whether a device argument names the host. On a machine without CUDA the CPU stands in
    for the device: there a torch.device (the accelerator's, a tensor's .device) names the
    device, and only the string "cpu" (or `.cpu()`) names the host."""
    if torch.cuda.is_available():
        return torch.device(device).type == "cpu"
    return isinstance(device, str) and torch.device(device).type == "cpu"


def _name(func) -> str:  # noqa: ANN001
    return getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))


def _caller() -> str:
    """The first frame outside torch and this module: the line that made the call."""
    f = sys._getframe(2)
    while f is not None and (f.f_code.co_filename == __file__ or "/torch/" in f.f_code.co_filename):
        f = f.f_back
    return "?" if f is None else f"{f.f_code.co_filename}:{f.f_lineno}"


def syncs_in_step(engine) -> list[str]:  # noqa: ANN001
    """The host syncs one `engine.step()` makes (benchmarks.train_loops' engines): none, for
    a step whose timing must not wait for the device."""
    with HostSyncs(engine.model.parameters()) as seen:
        engine.step()
    return seen.calls
