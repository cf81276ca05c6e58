"""The plugins a run keeps (docs/run-directory.md): RUN/plugins/, a copy of each plugin
file the run was given (t2.plugins) and its manifest, so that the run is rebuilt from its
own folder on any machine. What is made from a run carries the same folder: a
self-contained average (`t2 average --out`), an hf folder, a CTranslate2 export.

    plugins/
      manifest.json   {"format": 1, "plugins": [{"file": "dyt.py", "sha256": "...",
                       "source": "/home/me/dyt.py", "registers": ["norm dyt"]},
                       {"module": "my_package.norms", "registers": ["ffn reglu"]}]}
      dyt.py          the copy: its SHA-256 is checked before it is imported

A module given by name is recorded, not copied (it is imported by name). Reading a
folder's plugins (`load_kept`) imports each copy, unless this process has it already (the
same SHA-256), or another source provides every name it registers (an installed package, a
module). A copy whose names a loaded plugin file registers with other code is refused in
one line: the weights were trained with the copy. Trust: a run directory or checkpoint (a
folder `t2 train` wrote; t2 never downloads one) imports its own copies; any other folder
(an hf folder or a CTranslate2 export, downloaded or not) only when the caller trusts it
(`--trust-plugins`, `trust_plugins=True`), as transformers' trust_remote_code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from t2.atomic import atomic_file, sha256
from t2.errors import CheckpointError, ConfigError
from t2.plugins import Plugin, load_file, load_module, loaded
from t2.registry import KINDS
from t2.rundir.layout import CHECKPOINTS, PLUGINS, RunDir, write_json

MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1
TRUST = "--trust-plugins (trust_plugins=True in Python)"


def plugin_folder(path: str | Path) -> Path | None:
    """The plugins of a model folder: its own (a run, an export, a self-contained
    average), else its run directory's (a checkpoint in a run); None if it keeps none."""
    path = Path(path)
    candidates = [path / PLUGINS]
    if path.parent.name == CHECKPOINTS:
        candidates.append(RunDir.of(path).plugins)
    return next((c for c in candidates if (c / MANIFEST).is_file()), None)


def read_manifest(folder: Path) -> list[dict[str, Any]]:
    """The entries of a plugins folder's manifest, checked (one line if damaged)."""
    path = folder / MANIFEST
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        entries = raw["plugins"]
        ok = raw["format"] <= MANIFEST_FORMAT and all("registers" in e for e in entries)
    except (OSError, ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        raise CheckpointError(f"{path} is damaged or from a newer t2; use another copy of it")
    return entries


def kept_components(path: str | Path) -> list[str]:
    """The components ("KIND NAME") that the plugins a model folder keeps register."""
    folder = plugin_folder(path)
    return [n for e in read_manifest(folder) for n in e["registers"]] if folder else []


def keep_plugins(folder: str | Path, plugins: list[Plugin]) -> None:
    """Keep `plugins` in folder/plugins/: a copy of each file, a record of each module;
    those kept already stay. Each copy appears whole, then the manifest."""
    target = Path(folder) / PLUGINS
    entries = read_manifest(target) if (target / MANIFEST).is_file() else []
    kept = {e.get("sha256") for e in entries if "file" in e} | {e.get("module") for e in entries}
    added = [p for p in plugins if (p.sha256 if p.is_file else p.module) not in kept]
    if not added:
        return
    target.mkdir(parents=True, exist_ok=True)
    for plugin in added:
        entries.append(_keep(target, plugin, {e["file"] for e in entries if "file" in e}))
    write_json(target / MANIFEST, {"format": MANIFEST_FORMAT, "plugins": entries})


def _keep(target: Path, plugin: Plugin, taken: set[str]) -> dict[str, Any]:
    registers = list(plugin.registers)
    if not plugin.is_file or plugin.file is None:
        return {"module": plugin.module, "registers": registers}
    name = plugin.file.name
    if name in taken:  # another file of the same name: the copy's name says which
        name = f"{plugin.file.stem}-{plugin.sha256[:8]}.py"
    with atomic_file(target / name, binary=True) as f:
        f.write(plugin.file.read_bytes())
    return {"file": name, "sha256": plugin.sha256, "source": plugin.source, "registers": registers}


def carry_plugins(source: str | Path, folder: str | Path) -> None:
    """Copy the plugins `source` keeps (plugin_folder) into `folder`, an export or an
    average being written, so that it carries the code its config names."""
    found = plugin_folder(source)
    if found is None:
        return
    entries = read_manifest(found)
    (Path(folder) / PLUGINS).mkdir(parents=True, exist_ok=True)
    for entry in entries:
        if "file" in entry:
            copy = _verified(found, entry)
            (Path(folder) / PLUGINS / entry["file"]).write_bytes(copy.read_bytes())
    write_json(Path(folder) / PLUGINS / MANIFEST, {"format": MANIFEST_FORMAT, "plugins": entries})


def _verified(folder: Path, entry: dict[str, Any]) -> Path:
    copy = folder / entry["file"]
    if not copy.is_file() or sha256(copy) != entry["sha256"]:
        raise CheckpointError(
            f"{copy} is missing or does not match its SHA-256 in {folder / MANIFEST} (changed "
            f"or damaged after it was kept); restore it from the plugin's source "
            f"({entry.get('source', '?')})"
        )
    return copy


def load_kept(path: str | Path, trusted: bool) -> list[Plugin]:
    """Import the plugins the model folder `path` keeps (see the module doc); `trusted`:
    whether its code may run (a run directory's own, or the caller's explicit trust)."""
    folder = plugin_folder(path)
    if folder is None:
        return []
    out = []
    for entry in read_manifest(folder):
        names = [tuple(n.split(" ", 1)) for n in entry["registers"]]
        same = _same(entry)
        if same is not None:
            out.append(same)
            continue
        _check_clash(folder, entry, names)
        if all(kind in KINDS and name in KINDS[kind] for kind, name in names):
            continue  # provided by the caller's own code: a package, a module
        if not trusted:
            what = entry.get("file") or entry.get("module")
            raise CheckpointError(
                f"{Path(path)} carries plugin code ({folder.name}/{what}: "
                f"{', '.join(entry['registers']) or 'no component'}) that t2 runs only when "
                f"asked; read it, then pass {TRUST}, or pass that file yourself with --plugin"
            )
        file = _verified(folder, entry) if "file" in entry else None
        out.append(load_file(file) if file else load_module(entry["module"]))
    return out


def _same(entry: dict[str, Any]) -> Plugin | None:
    """The plugin of this process that is the kept one (same code, or same module)."""
    for plugin in loaded():
        if plugin.is_file and plugin.sha256 == entry.get("sha256"):
            return plugin
        if not plugin.is_file and plugin.module == entry.get("module"):
            return plugin
    return None


def _check_clash(folder: Path, entry: dict[str, Any], names: list[tuple[str, ...]]) -> None:
    """A plugin file of this process that registers a kept name with other code."""
    wanted = {" ".join(n) for n in names}
    for plugin in loaded():
        shared = sorted(wanted & set(plugin.registers))
        if plugin.is_file and "file" in entry and shared:
            raise ConfigError(
                f"plugin {plugin.source} registers {', '.join(shared)} with other code than "
                f"the copy {folder / entry['file']} its model was trained with (SHA-256 "
                f"{plugin.sha256[:12]} against {entry['sha256'][:12]}); leave that --plugin out "
                f"to use the copy, or retrain with the new code"
            )
