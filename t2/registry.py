"""One small registry per kind of component, on the config floor (docs/components.md).

A kind's built-in components are the modules of its package, one file each, and a file's
name is the component's name: `t2/model/norm/rmsnorm.py` is `model.norm: rmsnorm`. So the
registry knows the built-in names by listing the package, which imports nothing: checking
a config's names (`check`, `names`) and `t2 --help` load no torch. The module of a name is
imported when that name is first resolved (`get`, `facts`), when the model or the search
is built; no other module is imported, so a broken component breaks only its own name.

Each module registers its component beside its code with the kind's facts (t2.facts):
`@NORM.register("rmsnorm", NormFacts(...))`. A component defined outside t2 (a plugin
file, an installed package) registers the same way under a name of its own, with the
registry's decorator or `register(kind, name, facts)`. A duplicate name, a built-in name
claimed by another module, missing facts and an unknown kind are one-line ConfigErrors.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from t2.errors import ConfigError
from t2.facts import (
    FfnFacts,
    KernelFacts,
    NormFacts,
    PositionalFacts,
    ResidualFacts,
    SearchFacts,
)

T = TypeVar("T")
BUILT_IN = "built in"  # the origin of a name whose module is in its kind's package


@dataclass(frozen=True)
class Entry(Generic[T]):
    """A registered component: the object its name builds, its facts, and the module that
    registered it."""

    obj: T
    facts: Any
    module: str


class Registry(Generic[T]):
    """Maps names to components of one kind; duplicates and unknowns are errors. `package`
    holds the built-in ones (see the module doc); `facts`, the type of facts each must
    bring (None: none). Without a package (t2.data.tasks') it holds what is registered."""

    def __init__(
        self,
        kind: str,
        key: str = "",
        package: str | None = None,
        facts: type | None = None,
    ) -> None:
        self.kind, self.key, self.package, self.facts_type = kind, key, package, facts
        self._entries: dict[str, Entry[T]] = {}

    @functools.cached_property
    def built_in(self) -> frozenset[str]:
        """The names of the package's public modules, read from its folder (no import)."""
        if self.package is None:
            return frozenset()
        spec = importlib.util.find_spec(self.package)
        if spec is None or spec.submodule_search_locations is None:
            raise LookupError(f"{self.package} is not a package; fix the {self.kind} registry")
        modules = pkgutil.iter_modules(spec.submodule_search_locations)
        return frozenset(m.name for m in modules if not m.name.startswith("_"))

    def register(self, name: str, facts: Any = None) -> Callable[[T], T]:
        """A decorator that registers its object as `name` with its `facts`."""
        self._check_facts(name, facts)

        def decorator(obj: T) -> T:
            module = getattr(obj, "__module__", None) or type(obj).__module__
            self._check_home(name, module)
            if name in self._entries:
                first = self._entries[name].module
                raise ConfigError(
                    f"{self.kind} {name!r} is registered twice ({first} and {module}); "
                    f"give one of them another name"
                )
            self._entries[name] = Entry(obj, facts, module)
            return obj

        return decorator

    def _check_facts(self, name: str, facts: Any) -> None:
        want = self.facts_type
        if want is None and facts is not None:
            raise ConfigError(f"{self.kind} {name!r}: this kind takes no facts; leave them out")
        if want is not None and not isinstance(facts, want):
            raise ConfigError(
                f"{self.kind} {name!r} comes without its facts: pass a t2.facts."
                f"{want.__name__} to register (docs/components.md)"
            )

    def _check_home(self, name: str, module: str) -> None:
        """A built-in name is its own module's; a built-in module registers its own name."""
        home = f"{self.package}.{name}"
        if name in self.built_in and module != home:
            raise ConfigError(
                f"{self.kind} {name!r} is built in ({home}); register yours under another name"
            )
        parent, _, own = module.rpartition(".")
        if self.package is not None and parent == self.package and own != name:
            raise ConfigError(
                f"{self.kind} {name!r} is an object of {module}, a built-in module, which "
                f"registers its file's name, {own!r}; register an object of your own"
            )

    def check(self, name: str) -> str:
        """`name`, or a ConfigError listing the valid choices; imports nothing."""
        if name not in self:
            raise ConfigError(
                f"unknown {self.kind} {name!r}; valid choices: {', '.join(self.names())}"
            )
        return name

    def entry(self, name: str) -> Entry[T]:
        """The registration of `name`, its module imported on first use."""
        self.check(name)
        if name not in self._entries:  # a built-in name (check passed): import its module
            importlib.import_module(f"{self.package}.{name}")
        if name not in self._entries:
            raise LookupError(f"{self.package}.{name} registers no {self.kind} {name!r}")
        return self._entries[name]

    def get(self, name: str) -> T:
        """The implementation of `name`."""
        return self.entry(name).obj

    def facts(self, name: str) -> Any:
        """The facts `name` registered with (t2.facts)."""
        return self.entry(name).facts

    def origin(self, name: str) -> str:
        """BUILT_IN, or the module that registered `name`; imports nothing."""
        self.check(name)
        return BUILT_IN if name in self.built_in else self._entries[name].module

    def names(self) -> list[str]:
        return sorted(self.built_in | self._entries.keys())

    def __contains__(self, name: object) -> bool:
        return name in self.built_in or name in self._entries


POSITIONAL: Registry = Registry(
    "positional encoding (model.positional)", "positional", "t2.model.positional", PositionalFacts
)
NORM: Registry = Registry("normalisation (model.norm)", "norm", "t2.model.norm", NormFacts)
FFN: Registry = Registry("feed-forward (model.ffn)", "ffn", "t2.model.ffn", FfnFacts)
RESIDUAL: Registry = Registry(
    "residual connection (model.residual)", "residual", "t2.model.residual", ResidualFacts
)
ATTENTION: Registry = Registry(
    "attention kernel (model.attention)", "attention", "t2.model.kernels", KernelFacts
)
SEARCH: Registry = Registry(
    "search strategy (decode.search)", "search", "t2.decoding.search", SearchFacts
)
EXPORT: Registry = Registry("export format (t2 export --format)", "export", "t2.formats.export")
KINDS: dict[str, Registry] = {
    r.key: r for r in (POSITIONAL, NORM, FFN, RESIDUAL, ATTENTION, SEARCH, EXPORT)
}


def registry(kind: str) -> Registry:
    """The registry of a kind of component by its key, or a ConfigError listing them."""
    if kind not in KINDS:
        raise ConfigError(f"unknown kind of component {kind!r}; valid kinds: {', '.join(KINDS)}")
    return KINDS[kind]


def register(kind: str, name: str, facts: Any = None) -> Callable[[Any], Any]:
    """Register a component defined outside t2 as `name` of `kind` (positional, norm, ffn,
    residual, attention, search, export) with its facts: the same decorator t2's own use."""
    return registry(kind).register(name, facts)
