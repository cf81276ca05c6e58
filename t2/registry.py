"""One small registry per kind of component (timm-style: the name lives next to the code)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from t2.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names to constructors for one kind of component; duplicates and unknowns are errors."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def decorator(obj: T) -> T:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._entries[name] = obj
            return obj

        return decorator

    def get(self, name: str) -> T:
        if name not in self._entries:
            raise ConfigError(
                f"unknown {self.kind} {name!r}; valid choices: {', '.join(self.names())}"
            )
        return self._entries[name]

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries


POSITIONAL: Registry = Registry("positional encoding (model.positional)")
NORM: Registry = Registry("normalisation (model.norm)")
FFN: Registry = Registry("feed-forward (model.ffn)")
ATTENTION: Registry = Registry("attention kernel (model.attention)")
SEARCH: Registry = Registry("search strategy (decode.search)")
EXPORT: Registry = Registry("export format (t2 export --format)")
