"""Components from outside t2: plugins (docs/components.md, "Plugins").

A plugin is a Python file or an importable module that registers components with the
decorators t2's own use (`@NORM.register(...)`, `t2.registry.register(kind, name, facts)`).
It is imported when given: `--plugin PATH_OR_MODULE` on the command line (t2.cli imports
them before it builds the parser, whose choices are the registries' names), or
`load_plugins` from Python. Nothing else is imported, so `t2 --help` loads no torch. A
YAML file's `plugins:` (a recipe's, a sweep file's) is code named by a file that may have
been downloaded: it is imported only with `--trust-plugins` (`trust_plugins=True`), or
where the user gave each of its plugins already with --plugin (`load_listed`). Installed
packages offer theirs through entry points instead (t2.registry: the names are known
without an import).

Each plugin is imported once a process. A file is imported as a module named after its
stem and the SHA-256 of its bytes (`t2_plugin_dyt_3f2a9c1d04e5`): the file given and a run
directory's copy of it (t2.rundir.plugins) are one plugin, and two versions of a file are
two, whose shared names then clash in one line. A plugin file is self-contained: it is
copied alone into the runs that use it, so it imports t2, torch and installed packages,
not the files beside it. What each plugin registered is recorded (`Plugin.registers`).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from t2.atomic import sha256
from t2.errors import ConfigError, failed_import
from t2.registry import KINDS, SOURCES

MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass(frozen=True)
class Plugin:
    """A plugin imported in this process: as given (a file's absolute path or a module's
    name), the module it became, its file and that file's SHA-256 (a module's own file, if
    it has one), and the components it registered, as "KIND NAME"."""

    source: str
    module: str
    file: Path | None
    sha256: str
    registers: tuple[str, ...]

    @property
    def is_file(self) -> bool:
        """A plugin file (copied into runs), not a module imported by name (whose source
        is its name)."""
        return self.module != self.source


_LOADED: dict[str, Plugin] = {}  # by module, in the order imported


def loaded() -> list[Plugin]:
    """The plugins imported in this process, in order."""
    return list(_LOADED.values())


def is_file_spec(spec: str | Path) -> bool:
    """Whether a --plugin value names a file (a .py path) rather than a module."""
    text = str(spec)
    return text.endswith(".py") or "/" in text or "\\" in text or Path(text).exists()


def load_plugins(specs: Iterable[str | Path], base: Path | None = None) -> list[Plugin]:
    """Import each plugin (a .py file, relative to `base` if given, or a module name)."""
    return [load_plugin(spec, base) for spec in specs]


def load_listed(specs: Iterable[str], where: str, trusted: bool) -> list[Plugin]:
    """The plugins a YAML file lists (`where`: "recipe PATH", "sweep file PATH"), as files'
    absolute paths or modules' names: imported if `trusted`; else each must be one this
    process imported already (the same file's SHA-256, or the module: a --plugin the user
    typed), or they are refused in one line naming them and the opt-in."""
    specs = list(specs)
    if trusted:
        return load_plugins(specs)
    given = {spec: _given(spec) for spec in specs}
    unasked = [spec for spec, plugin in given.items() if plugin is None]
    if unasked:
        raise ConfigError(
            f"{where} lists plugins ({', '.join(unasked)}), code that t2 imports from a YAML "
            f"file only when asked; read it, then pass --trust-plugins (trust_plugins=True in "
            f"Python), or pass each with --plugin"
        )
    return [plugin for plugin in given.values() if plugin is not None]


def _given(spec: str) -> Plugin | None:
    """The plugin of this process that `spec` (a file's path or a module) is, if any."""
    if not is_file_spec(spec):
        return _LOADED.get(spec)
    path = Path(spec)
    digest = sha256(path) if path.is_file() else None
    return next((p for p in _LOADED.values() if p.is_file and p.sha256 == digest), None)


def load_plugin(spec: str | Path, base: Path | None = None) -> Plugin:
    """Import one plugin, once a process; a missing file or module, or any failure inside
    it, is one ConfigError naming the file and line."""
    if not is_file_spec(spec):
        return load_module(str(spec))
    path = Path(spec).expanduser()
    path = (base / path if base is not None and not path.is_absolute() else path).absolute()
    if path.is_dir():
        raise ConfigError(
            f"plugin {spec} is a folder; pass a .py file, or a module's name with its folder "
            f"on PYTHONPATH"
        )
    if not path.is_file():
        raise ConfigError(
            f"plugin file {path} not found; pass an existing .py file or an importable module"
        )
    return load_file(path)


def module_name(path: Path, digest: str) -> str:
    """The module a plugin file is imported as: its stem and its content's hash."""
    stem = re.sub(r"\W", "_", path.stem)
    return f"t2_plugin_{stem}_{digest[:12]}"


def load_file(path: Path) -> Plugin:
    """Import a plugin file (see the module doc), or return it if imported already."""
    digest = sha256(path)
    module = module_name(path, digest)
    if module in _LOADED:
        return _LOADED[module]
    spec = importlib.util.spec_from_file_location(module, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"plugin file {path} cannot be imported; pass a .py file")
    code = importlib.util.module_from_spec(spec)
    SOURCES[module] = f"plugin file {path}"
    sys.modules[module] = code  # as an import does: dataclasses and typing look it up
    try:
        registers = _importing(lambda: spec.loader.exec_module(code), f"plugin {path}", str(path))
    except ConfigError:
        del sys.modules[module], SOURCES[module]
        raise
    _LOADED[module] = Plugin(str(path), module, path, digest, registers)
    return _LOADED[module]


def load_module(name: str) -> Plugin:
    """Import a plugin module by name (a module of an installed package, or on PYTHONPATH)."""
    if name in _LOADED:
        return _LOADED[name]
    try:
        spec = importlib.util.find_spec(name) if MODULE_NAME.match(name) else None
    except (ModuleNotFoundError, ValueError):
        spec = None
    except Exception as err:  # its package's own import failed
        raise failed_import(err, f"plugin module {name}", name.split(".")[0]) from None
    if spec is None:
        raise ConfigError(
            f"plugin {name!r} is neither a .py file nor an importable module; pass a file's "
            f"path, or install the module (or put its folder on PYTHONPATH)"
        )
    home = str(Path(spec.origin).parent) if spec.origin else name
    registers = _importing(lambda: importlib.import_module(name), f"plugin module {name}", home)
    file = Path(spec.origin) if spec.origin and Path(spec.origin).is_file() else None
    _LOADED[name] = Plugin(name, name, file, sha256(file) if file else "", registers)
    return _LOADED[name]


def _registered() -> dict[str, dict[str, str]]:
    """What every registry holds now, but built-in names: kind -> name -> module."""
    return {
        kind: {n: m for n, m in r.registered().items() if n not in r.built_in}
        for kind, r in KINDS.items()
    }


def _importing(run: Callable[[], object], what: str, home: str) -> tuple[str, ...]:
    """Run an import; the components it registered as "KIND NAME". If it fails, what it
    registered is forgotten (so a corrected plugin loads in the same process) and the
    failure is one line (t2.errors.failed_import)."""
    before = _registered()
    try:
        run()
    except (Exception, SystemExit) as err:
        for kind, names in _registered().items():
            for name in names.keys() - before[kind].keys():
                KINDS[kind].forget(name)
        raise failed_import(err, what, home) from None
    after = _registered()
    return tuple(f"{k} {n}" for k in after for n in sorted(after[k].keys() - before[k].keys()))


@contextlib.contextmanager
def isolated() -> Iterator[None]:
    """Plugins imported inside the block are forgotten after it: the names they registered,
    their record and their modules (a test's plugin does not reach the next test)."""
    before, records, sources = _registered(), dict(_LOADED), dict(SOURCES)
    try:
        yield
    finally:
        for kind, names in _registered().items():
            for name in names.keys() - before[kind].keys():
                KINDS[kind].forget(name)
        for module in _LOADED.keys() - records.keys():
            sys.modules.pop(module, None)
        _LOADED.clear()
        _LOADED.update(records)
        SOURCES.clear()
        SOURCES.update(sources)
