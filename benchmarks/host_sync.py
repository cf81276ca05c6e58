"""Which calls in a training step make the host wait for the accelerator, checked on a CPU
(where nothing waits) by following which tensors would live on the device. Seen where
every call ends, in aten's operators (a TorchDispatchMode): reading a value (`.item()`,
`bool(t)`, `print(t)`, an f-string: `_local_scalar_dense`), an output whose size depends on
the values (`nonzero`, so `t[t > 0]`, one-argument `torch.where`, `argwhere`;
`masked_select`, `unique`, `bincount`, `histc`, `repeat_interleave` without
`output_size`, indexing or `index_put_` with a bool mask), a Python answer (`equal`,
`is_nonzero`, `allclose`), a copy into a host tensor (`host.copy_(dev)`), `masked_fill`
with a device tensor as its value (CUDA's kernel reads it); and, where the caller's intent
is still visible (a TorchFunctionMode), a copy to the host (`.cpu()`, `.to("cpu")`,
`.to(host_tensor)`, `torch.as_tensor`/`asarray` with a host device, `.type()` to a host
type), `.tolist()`, `.numpy()`, `np.asarray(t)` and printing a tensor of several values.
Not seen: syncs a kernel makes for its own error checks (`torch.linalg.inv`,
`cholesky`), and `torch.save`. Each is
recorded with the Python line that made it and the stack above, so that a library's own
syncs can be told apart by where they are."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterable, Iterator
from typing import NamedTuple

import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.weak import WeakIdKeyDictionary

aten = torch.ops.aten
# aten operators that wait for the device whenever they read a device tensor
WAITS = {
    aten._local_scalar_dense,  # .item(), bool(), int(), float(), formatting a value
    aten.nonzero,
    aten.masked_select,
    aten.unique_consecutive,
    aten._unique,
    aten._unique2,
    aten.unique_dim,
    aten.unique_dim_consecutive,
    aten.equal,
    aten.allclose,
    aten.is_nonzero,
    aten.bincount,
    aten.histc,
}
INDEXING = {aten.index, aten.index_put, aten.index_put_, aten._index_put_impl_}
# Python-level reads that reach no aten operator seen here (printing turns the modes off)
READS = {Tensor.tolist, Tensor.numpy, Tensor.__array__, Tensor.__repr__}
NEW = {torch.tensor, torch.as_tensor, torch.asarray}  # from a list: each element's value
COPIES = {Tensor.to, Tensor.cuda, Tensor.cpu}


class Sync(NamedTuple):
    """One host sync: the operator or call, the line that made it, and the stack above."""

    what: str
    where: str  # the first frame outside torch and this module
    stack: tuple[str, ...]  # every frame outside torch and this module, innermost first

    def __str__(self) -> str:
        return f"{self.what} at {self.where}"


class HostSyncs:
    """Records, in `syncs` (and as text in `calls`), each host sync made while it is
    active. The device tensors are those given (parameters, buffers, optimizer state: see
    held_tensors), each copy of a host tensor to the device, each tensor made with an
    explicit `device=`, the gradients as they accumulate, and every output of an operator
    that read one of them. `stand_in`: this CPU stands in for the device, so a
    torch.device (the device's, a tensor's .device) names the device and only the string
    "cpu", `.cpu()` or a host tensor name the host (the default without CUDA); otherwise a
    torch.device("cpu") names the host too."""

    def __init__(self, device_tensors: Iterable[Tensor] = (), stand_in: bool | None = None) -> None:
        self.syncs: list[Sync] = []
        self.stand_in = not torch.cuda.is_available() if stand_in is None else stand_in
        self.device = WeakIdKeyDictionary()
        self._hooks = []
        for t in device_tensors:
            self.device[t] = True
            if t.requires_grad and t.is_leaf:
                self._hooks.append(t.register_post_accumulate_grad_hook(self._mark_grad))
        self._modes = (_Intent(self), _Operators(self))

    @property
    def calls(self) -> list[str]:
        return [str(s) for s in self.syncs]

    def _mark_grad(self, p: Tensor) -> None:
        self.device[p.grad] = True

    def on_device(self, x: object) -> bool:
        return isinstance(x, Tensor) and x in self.device

    def mark(self, out: object) -> None:
        for t in tree_leaves(out):
            if isinstance(t, Tensor):
                self.device[t] = True

    def record(self, what: str) -> None:
        stack = _stack()
        self.syncs.append(Sync(what, stack[0] if stack else "?", stack))

    def names_host(self, target: object) -> bool:
        if isinstance(target, Tensor):
            return not self.on_device(target)
        if self.stand_in:
            return isinstance(target, str) and torch.device(target).type == "cpu"
        return torch.device(target).type == "cpu"

    def __enter__(self) -> HostSyncs:
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        for mode in reversed(self._modes):
            mode.__exit__(*exc)
        for h in self._hooks:
            h.remove()


class _Intent(TorchFunctionMode):
    """The calls whose meaning the operators lose: where a copy goes, reads with no aten
    operator, and factories given a device."""

    def __init__(self, seen: HostSyncs) -> None:
        super().__init__()
        self.seen = seen

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        if func in COPIES and args and isinstance(args[0], Tensor):
            return self._copy(func, args, kwargs)
        source = args[0] if args else None
        if func in READS and self.seen.on_device(source):
            self.seen.record(_name(func))
        elif func is Tensor.__format__ and self.seen.on_device(source) and source.numel() != 1:
            self.seen.record(_name(func))  # printed whole (one value: its .item() is seen)
        elif func in NEW and self.seen.on_device(source) and self._to_host(kwargs):
            self.seen.record(f"{_name(func)} to the host")
        elif func is Tensor.type and self.seen.on_device(source) and _host_type(args, kwargs):
            self.seen.record(f"{_name(func)} to a host type")
        elif func in NEW and args and _lists_device_tensors(args[0], self.seen):
            self.seen.record(f"{_name(func)} of a list of device tensors")
        out = func(*args, **kwargs)
        made = kwargs.get("device")
        if made is not None and not self.seen.names_host(made):
            self.seen.mark(out)
        elif func is Tensor.new_tensor and self.seen.on_device(source) and made is None:
            self.seen.mark(out)  # made where its tensor is: on the device
        return out

    def _to_host(self, kwargs: dict) -> bool:
        made = kwargs.get("device")
        return made is not None and self.seen.names_host(made)

    def _copy(self, func, args, kwargs):  # noqa: ANN001
        src, out = args[0], func(*args, **kwargs)
        if func is Tensor.to:
            given = [a for a in (*args[1:], kwargs.get("device"), kwargs.get("other"))]
            given = [a for a in given if isinstance(a, str | torch.device | Tensor)]
            target = given[0] if given else None
        else:
            target = "cpu" if func is Tensor.cpu else torch.device("cuda")
        if target is None:  # a cast, not a copy: it stays where it was
            if self.seen.on_device(src):
                self.seen.mark(out)
        elif self.seen.names_host(target):
            if self.seen.on_device(src):
                self.seen.record(f"{_name(func)} to the host")
        else:
            if out is src and not self.seen.on_device(src):  # a CPU stands in for the
                out = src.clone()  # device: the copy is a new tensor, as a transfer's is
            self.seen.mark(out)
        return out


class _Operators(TorchDispatchMode):
    """Every aten operator: one that waits for the device on a device tensor is recorded,
    and whatever reads a device tensor makes device tensors."""

    def __init__(self, seen: HostSyncs) -> None:
        super().__init__()
        self.seen = seen

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        read = any(self.seen.on_device(a) for a in tree_leaves((args, kwargs)))
        if read and _waits(func, args, kwargs, self.seen):
            self.seen.record(str(func))
        out = func(*args, **kwargs)
        if read:
            self.seen.mark(out)
        return out


def _host_type(args: tuple, kwargs: dict) -> bool:
    """Whether Tensor.type's target (a name or a tensor type) is a host type; none: a read
    of the type's name, no copy."""
    target = args[1] if len(args) > 1 else kwargs.get("dtype")
    if target is None:
        return False
    name = target if isinstance(target, str) else getattr(target, "__module__", "") + "."
    return "cuda" not in str(name)


def _lists_device_tensors(data: object, seen: HostSyncs) -> bool:
    """Whether `data` is a list or tuple with a device tensor in it (torch.tensor reads
    each one's value; a tensor alone is no list: as_tensor keeps it where it is)."""
    if not isinstance(data, list | tuple):
        return False
    return any(seen.on_device(t) for t in tree_leaves(data))


def _waits(func, args: tuple, kwargs: dict, seen: HostSyncs) -> bool:  # noqa: ANN001
    packet = func.overloadpacket
    if packet in WAITS:
        return True
    if packet in INDEXING:  # a bool mask's True count sizes the output
        indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
        return any(isinstance(i, Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices)
    if func is aten.repeat_interleave.Tensor:
        return kwargs.get("output_size", args[1] if len(args) > 1 else None) is None
    if packet in (aten.masked_fill, aten.masked_fill_) and len(args) > 2:
        return seen.on_device(args[2])  # a device tensor as the value: CUDA reads it
    if packet is aten.copy_:  # into a host tensor, from a device one
        return not seen.on_device(args[0]) and seen.on_device(args[1])
    return False


def held_tensors(obj: object, depth: int = 3) -> Iterator[Tensor]:
    """The tensors an engine holds: its modules' parameters and buffers, its optimizers'
    state (but torch's own host `step` counter, kept on the host unless the optimizer is
    capturable or fused), and tensors in its attributes, dataclasses and containers."""
    if isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, torch.nn.Module):
        yield from obj.parameters()
        yield from obj.buffers()
    elif isinstance(obj, torch.optim.Optimizer):
        for group in obj.param_groups:
            on_host = not (group.get("capturable") or group.get("fused"))
            for p in group["params"]:
                for name, value in obj.state.get(p, {}).items():
                    if isinstance(value, Tensor) and not (name == "step" and on_host):
                        yield value
    elif depth > 0 and isinstance(obj, dict):
        for value in obj.values():
            yield from held_tensors(value, depth - 1)
    elif depth > 0 and isinstance(obj, list | tuple):
        for value in obj:
            yield from held_tensors(value, depth - 1)
    elif depth > 0 and dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from held_tensors(getattr(obj, f.name), depth - 1)


def _name(func) -> str:  # noqa: ANN001
    return getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))


def _stack() -> tuple[str, ...]:
    """The frames outside torch and this module, innermost first: the line that made the
    call, then its callers."""
    frames, f = [], sys._getframe(1)
    while f is not None:
        name = f.f_code.co_filename
        if name != __file__ and "/torch/" not in name:
            frames.append(f"{name}:{f.f_lineno}")
        f = f.f_back
    return tuple(frames)


def syncs_in_step(engine) -> list[str]:  # noqa: ANN001
    """The host syncs one `engine.step()` makes (benchmarks.train_loops' engines): none, for
    a step whose timing must not wait for the device. The device tensors: every tensor the
    engine holds (held_tensors of its attributes), so that a sync on the optimizer's
    steady-state or a buffer is seen on every step, not only the first."""
    held = [t for value in vars(engine).values() for t in held_tensors(value)]
    with HostSyncs(held) as seen:
        engine.step()
    return seen.calls
