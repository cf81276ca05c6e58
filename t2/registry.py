"""One small registry per kind of component, on the config floor: each registry declares its
names and the module that implements each, and imports that module only when a name is
first resolved (`get`), when the model or the search is built. Checking a config's names
(`check`, `names`) imports no implementation, so `t2 --help` and a config check load no
torch (transformers' auto classes map names to modules the same way). The implementation
registers itself beside its code (timm-style) and may register only a declared name."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

from t2.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names to constructors for one kind of component; duplicates and unknowns are
    errors. `homes` (name -> module) declares the names; a registry without it (a module's
    own, as t2.data.tasks') holds whatever its module registers."""

    def __init__(self, kind: str, homes: Mapping[str, str] | None = None) -> None:
        self.kind = kind
        self.homes = dict(homes) if homes is not None else None
        self._entries: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        if self.homes is not None and name not in self.homes:
            raise ValueError(
                f"{self.kind} {name!r} is not declared; add it with its module to t2/registry.py"
            )

        def decorator(obj: T) -> T:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._entries[name] = obj
            return obj

        return decorator

    def check(self, name: str) -> str:
        """`name`, or a ConfigError listing the valid choices; imports nothing."""
        if name not in self:
            raise ConfigError(
                f"unknown {self.kind} {name!r}; valid choices: {', '.join(self.names())}"
            )
        return name

    def get(self, name: str) -> T:
        """The implementation of `name`, its module imported on first use."""
        self.check(name)
        if name not in self._entries and self.homes is not None:
            importlib.import_module(self.homes[name])
        if name not in self._entries:
            raise LookupError(
                f"{self.homes and self.homes[name]} registers no {self.kind} {name!r}"
            )
        return self._entries[name]

    def names(self) -> list[str]:
        return sorted(self.homes if self.homes is not None else self._entries)

    def __contains__(self, name: object) -> bool:
        return name in (self.homes if self.homes is not None else self._entries)


def _at(module: str, *names: str) -> dict[str, str]:
    return dict.fromkeys(names, module)


POSITIONAL: Registry = Registry(
    "positional encoding (model.positional)",
    _at("t2.model.positional", "none", "sinusoidal", "learned", "rope", "alibi"),
)
NORM: Registry = Registry(
    "normalisation (model.norm)", _at("t2.model.norm", "layernorm", "rmsnorm")
)
FFN: Registry = Registry(
    "feed-forward (model.ffn)", _at("t2.model.ffn", "relu", "gelu", "swiglu", "geglu")
)
ATTENTION: Registry = Registry(
    "attention kernel (model.attention)",
    _at("t2.model.kernels", "sdpa", "sdpa_cudnn", "math", "flash_attn"),
)
SEARCH: Registry = Registry(
    "search strategy (decode.search)",
    {**_at("t2.decoding.greedy", "greedy", "sample"), **_at("t2.decoding.beam", "beam")},
)
EXPORT: Registry = Registry(
    "export format (t2 export --format)",
    {**_at("t2.formats.ct2", "ct2"), **_at("t2.formats.hf", "hf")},
)
