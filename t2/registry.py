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

An installed package offers components through the entry-point group `t2.components`, one
entry point a component, named `KIND.NAME` (`norm.dyt = my_package.dyt`): as for a built-in
name, the registry knows the name from the package's metadata without importing it, and
imports the entry point's module when the name is first resolved (docs/components.md).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import pkgutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from t2.errors import ConfigError, failed_import
from t2.facts import (
    FfnFacts,
    KernelFacts,
    NormFacts,
    PositionalFacts,
    ResidualFacts,
    SearchFacts,
)
from t2.installed import entry_points, package_of

T = TypeVar("T")
BUILT_IN = "built in"  # the origin of a name whose module is in its kind's package
ENTRY_POINTS = "t2.components"  # the entry-point group of installed packages' components
# where a module that registers components came from, when its name does not say it: a
# plugin file's module (t2.plugins fills it); origin() and the one-line errors show it
SOURCES: dict[str, str] = {}


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

    @property
    def packaged(self) -> dict[str, Any]:
        """The names installed packages offer for this kind: name -> its entry point (no
        import; see the module doc)."""
        return offered().get(self.key, {})

    def register(self, name: str, facts: Any = None) -> Callable[[T], T]:
        """A decorator that registers its object as `name` with its `facts`."""
        self._check_facts(name, facts)

        def decorator(obj: T) -> T:
            module = getattr(obj, "__module__", None) or type(obj).__module__
            # the file whose code registers it: a class's __module__ and a module's
            # __name__ are only claims (a plugin sets either); its code's file is where
            # the import found it
            caller = Path(sys._getframe(1).f_code.co_filename)
            self._check_home(name, module, caller)
            if name in self._entries:
                first = describe(self._entries[name].module)
                raise ConfigError(
                    f"{self.kind} {name!r} is registered twice ({first} and "
                    f"{describe(module)}); give one of them another name"
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

    def _check_home(self, name: str, module: str, caller: Path) -> None:
        """A built-in name is its own module's, a packaged name its package's, each
        registered by code in that module's file (the package's folder), whatever the
        object's __module__ or the module's __name__ claims; a built-in module registers
        its own name."""
        home = f"{self.package}.{name}"
        own = name in self.built_in and module == home and _within(caller, self.package, name)
        if name in self.built_in and not own:
            raise ConfigError(
                f"{self.kind} {name!r} is built in ({home}); register yours under another name"
            )
        offer = self.packaged.get(name)
        top = offer.module.split(".")[0] if offer is not None else ""
        if offer is not None and (module.split(".")[0] != top or not _within(caller, top)):
            raise ConfigError(
                f"{self.kind} {name!r} is offered by the installed package {package_of(offer)} "
                f"({offer.value}); register yours under another name"
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
        if name not in self._entries and name in self.built_in:  # import its module
            importlib.import_module(f"{self.package}.{name}")
        elif name not in self._entries:  # an installed package's (check passed)
            offer = self.packaged[name]
            try:
                importlib.import_module(offer.module)
            except (Exception, SystemExit) as err:
                where = f"{self.kind} {name!r} of package {package_of(offer)} ({offer.value})"
                if isinstance(err, ModuleNotFoundError) and offer.module == err.name:
                    raise ConfigError(
                        f"{where}: {offer.module} is not installed; reinstall "
                        f"{package_of(offer)}, or fix its entry point"
                    ) from None
                raise failed_import(err, where, offer.module.split(".")[0]) from None
            if name not in self._entries:
                raise ConfigError(
                    f"{offer.value}, entry point {offer.name} of {package_of(offer)}, registers "
                    f"no {self.kind} {name!r}; register it there (docs/components.md)"
                )
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
        """Where `name` comes from: BUILT_IN, `package NAME VERSION` (an entry point), or
        the module that registered it (a plugin file's, as SOURCES says); imports nothing."""
        self.check(name)
        if name in self.built_in:
            return BUILT_IN
        if name in self.packaged:
            return f"package {package_of(self.packaged[name])}"
        return describe(self._entries[name].module)

    def registered(self) -> dict[str, str]:
        """The names registered so far (imported ones), each with its module."""
        return {name: entry.module for name, entry in self._entries.items()}

    def forget(self, name: str) -> None:
        """Drop a registration (a plugin that failed half-way through its import)."""
        self._entries.pop(name, None)

    def names(self) -> list[str]:
        return sorted(self.built_in | self.packaged.keys() | self._entries.keys())

    def __contains__(self, name: object) -> bool:
        return name in self.built_in or name in self._entries or name in self.packaged


def _within(file: Path, package: str, name: str = "") -> bool:
    """Whether `file` (links resolved) is the module `name` of `package`'s folders (its
    NAME.py or NAME/__init__.py), or with no name lies anywhere in them."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return False
    folders = (spec.submodule_search_locations or []) if spec is not None else []
    file = file.resolve()
    for folder in map(Path, folders):
        folder = folder.resolve()
        if not name and file.is_relative_to(folder):
            return True
        if name and file in (folder / f"{name}.py", folder / name / "__init__.py"):
            return True
    return False


def describe(module: str) -> str:
    """A module that registers components, as the user knows it (SOURCES)."""
    return SOURCES.get(module, module)


@functools.cache
def offered() -> dict[str, dict[str, Any]]:
    """Every entry point of ENTRY_POINTS by kind and name, each checked: a known kind, a
    name of its own (neither built in nor offered twice). Read once a process."""
    found: dict[str, dict[str, Any]] = {}
    for offer in entry_points(ENTRY_POINTS):
        kind, _, name = offer.name.partition(".")
        fix = f"fix the entry point or uninstall {package_of(offer)}"
        if kind not in KINDS or not name:
            raise ConfigError(
                f"entry point {offer.name!r} ({ENTRY_POINTS}) of {package_of(offer)} names no "
                f"known kind: write KIND.NAME with KIND one of {', '.join(KINDS)}; {fix}"
            )
        if name in KINDS[kind].built_in or name in found.get(kind, {}):
            first = found.get(kind, {}).get(name)
            other = f"by {package_of(first)} too" if first else "a built-in name"
            raise ConfigError(
                f"{package_of(offer)} offers {kind} {name!r} ({ENTRY_POINTS}), {other}; {fix}"
            )
        found.setdefault(kind, {})[name] = offer
    return found


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
