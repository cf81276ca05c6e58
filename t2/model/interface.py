"""What a component must be to fit its kind, checked when it is built, so that a plugin's
mistake is one line at its cause rather than a traceback deep in a forward pass: it takes
its kind's arguments, it builds the kind's type, and a module from outside t2 (a plugin's,
a package's) keeps its input's shape. Each kind's builder calls these with its own
interface (t2.model.norm, t2.model.ffn, t2.model.positional, the attention kernel, the
search strategy, the export format); the facts' parameter count is t2.model.summary's."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from t2.errors import ConfigError
from t2.registry import BUILT_IN, Registry

FIX = "give it its kind's interface (docs/components.md)"


def _named(registry: Registry, name: str) -> str:
    return f"{registry.kind} {name!r} ({registry.origin(name)})"


def takes(registry: Registry, name: str, make: Callable[..., Any], *args: str, **kw: Any) -> None:
    """That `make` accepts the call its kind makes, with the arguments named `args`
    (positional) and `kw` (keywords), or a ConfigError naming that call."""
    try:
        signature = inspect.signature(make)
    except (TypeError, ValueError):  # no signature to read (a builtin): trust it
        return
    try:
        signature.bind(*args, **kw)
    except TypeError as err:
        call = ", ".join([*args, *(f"{k}=..." for k in kw)])
        raise ConfigError(
            f"{_named(registry, name)} is called as ({call}) but takes {signature} ({err}); {FIX}"
        ) from None


def build(registry: Registry, name: str, expected: type, /, **args: Any) -> Any:
    """`name` of `registry` made with its kind's arguments (`args`, passed in order), if it
    takes them and makes an `expected`; else a ConfigError that says which."""
    make = registry.get(name)
    takes(registry, name, make, *args)
    built = make(*args.values())
    if not isinstance(built, expected):
        raise ConfigError(
            f"{_named(registry, name)} builds a {type(built).__name__}, not a "
            f"{expected.__name__}; {FIX}"
        )
    return built


def keeps_shape(registry: Registry, name: str, module: nn.Module, d_model: int) -> nn.Module:
    """`module` if its forward maps (1, 2, d_model) to that shape. Checked for modules from
    outside t2 only (t2's own are tested), in eval mode without gradients, the random state
    kept, so that building a model draws the same weights with or without the check."""
    if registry.origin(name) == BUILT_IN:
        return module
    probe = torch.zeros(1, 2, d_model, device=next(module.parameters(), torch.zeros(0)).device)
    was_training = module.training
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            out = module.eval()(probe)
    except Exception as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConfigError(
            f"{_named(registry, name)} fails on an input of shape (1, 2, {d_model}) ({reason}); "
            f"{FIX}"
        ) from None
    finally:
        module.train(was_training)
    if not isinstance(out, torch.Tensor) or out.shape != probe.shape:
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ConfigError(
            f"{_named(registry, name)} maps an input of shape (1, 2, {d_model}) to {got}; a "
            f"{registry.key} keeps its input's shape: {FIX}"
        )
    return module
