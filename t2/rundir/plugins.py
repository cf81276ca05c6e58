"""The plugins a run keeps (docs/run-directory.md): RUN/plugins/, a copy of each plugin
file the run was given (t2.plugins) and its manifest, so that the run is rebuilt from its
own folder on any machine. What is made from a run carries the same folder: a
self-contained average (`t2 average --out`), an hf folder, a CTranslate2 export.

    plugins/
      manifest.json   {"format": 1, "plugins": [{"file": "dyt.py", "sha256": "...",
                       "registers": ["norm dyt"]},
                       {"module": "my_package.norms", "registers": ["ffn reglu"]}]}
      dyt.py          the copy: its SHA-256 is checked before it is imported

A module given by name is recorded, not copied (it is imported by name). No local path is
recorded: the manifest travels with exports and pushes. A manifest is read as hostile: a
file entry names a plain file name inside plugins/ (no folder, no `..`), a module entry an
importable name, or the whole manifest is refused in one line before anything is joined
to a folder.

Reading a folder's plugins (`load_kept`) puts every entry through one trust check: it
passes if this process has the same code already (the same SHA-256, or the same module:
given by the user with --plugin), or if every name it registers comes from the user's own
code (an installed package's entry point, a plugin this process imported), or if the
folder is trusted. A copy whose names a loaded plugin file registers with other code is
refused in one line: the weights were trained with the copy. Trust: a run directory or
checkpoint (a folder `t2 train` wrote; t2 never downloads one, and never takes a Hub
snapshot or a `hf download --local-dir` folder for one: t2.formats.choose) imports its own
copies; any other folder (an hf folder or a CTranslate2 export, downloaded or not) only
when the caller trusts it (`--trust-plugins`, `trust_plugins=True`), as transformers'
trust_remote_code. The refusal lists every entry that did not pass, with its SHA-256.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from t2.atomic import atomic_file, sha256
from t2.errors import CheckpointError, ConfigError
from t2.plugins import MODULE_NAME, Plugin, load_file, load_module, loaded
from t2.registry import KINDS
from t2.rundir.downloaded import hub_repo_cache, is_downloaded
from t2.rundir.layout import CHECKPOINTS, PLUGINS, RunDir, write_json

MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1
TRUST = "--trust-plugins (trust_plugins=True in Python)"
PLAIN_FILE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*\.py$")  # a copy's name: no folder


def plugin_folder(path: str | Path) -> Path | None:
    """The plugins of a model folder: its own (a run, an export, a self-contained
    average), else its run directory's (a checkpoint in a run); None if it keeps none."""
    path = Path(path)
    candidates = [path / PLUGINS]
    if path.parent.name == CHECKPOINTS:
        candidates.append(RunDir.of(path).plugins)
    return next((c for c in candidates if (c / MANIFEST).is_file()), None)


def read_manifest(folder: Path) -> list[dict[str, Any]]:
    """The entries of a plugins folder's manifest, checked (one line if damaged, or if an
    entry names anything but a plain file name inside the folder, or a module's name)."""
    path = folder / MANIFEST
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        entries = raw["plugins"]
        ok = raw["format"] <= MANIFEST_FORMAT and all(map(_well_formed, entries))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        ok = False
    if not ok:
        raise CheckpointError(f"{path} is damaged or from a newer t2; use another copy of it")
    for entry in entries:
        if "file" in entry and not PLAIN_FILE.match(entry["file"]):
            raise CheckpointError(
                f"{path} names plugin file {entry['file']!r}, which is not a plain .py file name "
                f"inside {folder.name}/; t2 reads no file outside it: use another copy of the "
                f"folder"
            )
        if "module" in entry and not MODULE_NAME.match(entry["module"]):
            raise CheckpointError(
                f"{path} names plugin module {entry['module']!r}, which is not a module name; "
                f"use another copy of the folder"
            )
    return entries


def _well_formed(entry: dict[str, Any]) -> bool:
    """A file entry (file, sha256) or a module entry, each with its registered names."""
    names = entry["registers"]
    kinds = isinstance(names, list) and all(isinstance(n, str) and " " in n for n in names)
    if "file" in entry:
        return kinds and isinstance(entry["file"], str) and isinstance(entry["sha256"], str)
    return kinds and isinstance(entry["module"], str)


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
    return {"file": name, "sha256": plugin.sha256, "registers": registers}


def carry_plugins(source: str | Path, folder: str | Path) -> None:
    """Copy the plugins `source` keeps (plugin_folder) into `folder`, an export or an
    average being written, so that it carries the code its config names."""
    found = plugin_folder(source)
    if found is None:
        return
    # no local path travels: manifests before format 1's last revision kept each source
    entries = [{k: v for k, v in e.items() if k != "source"} for e in read_manifest(found)]
    (Path(folder) / PLUGINS).mkdir(parents=True, exist_ok=True)
    for entry in entries:
        if "file" in entry:  # a plain name (read_manifest): inside both folders
            copy = _verified(found, entry)
            (Path(folder) / PLUGINS / entry["file"]).write_bytes(copy.read_bytes())
    write_json(Path(folder) / PLUGINS / MANIFEST, {"format": MANIFEST_FORMAT, "plugins": entries})


def _verified(folder: Path, entry: dict[str, Any]) -> Path:
    """A kept copy, checked: its bytes lie inside the plugins folder (a link to a file
    elsewhere is refused; a Hub snapshot's links into its repo's blobs/ are the hub cache's
    own layout) and match the manifest's SHA-256."""

    copy = folder / entry["file"]
    target, repo = copy.resolve(), hub_repo_cache(folder)
    homes = [folder.resolve(), *([(repo / "blobs").resolve()] if repo is not None else [])]
    if copy.exists() and target.parent not in homes:
        raise CheckpointError(
            f"{copy} links to {target}, outside {folder}; t2 reads no plugin file from outside "
            f"its plugins/ folder: replace the link with the file"
        )
    if not copy.is_file() or sha256(copy) != entry["sha256"]:
        raise CheckpointError(
            f"{copy} is missing or does not match its SHA-256 in {folder / MANIFEST} (changed "
            f"or damaged after it was kept); restore the plugin file whose SHA-256 is "
            f"{entry['sha256']} there"
        )
    return copy


def may_run_kept(path: str | Path, own: bool, trust_plugins: bool) -> bool:
    """The one trust decision of every reader of a model folder's plugins: whether the
    copies `path` keeps may run. `own`: a folder of a format that `t2 train` writes (a run,
    a checkpoint, an average), whose copies run unless it was downloaded
    (t2.rundir.downloaded.is_downloaded: every folder above it is looked at); any other folder,
    or a downloaded one, only with the caller's `trust_plugins`."""

    return trust_plugins or (own and not is_downloaded(path))


def load_kept(path: str | Path, trust_plugins: bool = False, own: bool = False) -> list[Plugin]:
    """Import the plugins the model folder `path` keeps (see the module doc), trusted as
    may_run_kept decides."""
    trusted = may_run_kept(path, own, trust_plugins)
    folder = plugin_folder(path)
    if folder is None:
        return []
    out, refused = [], []
    for entry in read_manifest(folder):
        names = [tuple(n.split(" ", 1)) for n in entry["registers"]]
        same = _same(entry)
        if same is not None:
            out.append(same)
            continue
        _check_clash(folder, entry, names)
        if not trusted and _users_own(names):
            continue  # provided by the caller's own code: a package, a plugin given
        if not trusted:
            refused.append(entry)
            continue
        file = _verified(folder, entry) if "file" in entry else None
        out.append(load_file(file) if file else load_module(entry["module"]))
    if refused:
        listed = "; ".join(_described(folder, e) for e in refused)
        raise CheckpointError(
            f"{Path(path)} carries plugin code ({listed}) that t2 runs only when asked; read "
            f"it, then pass {TRUST}, or pass that code yourself with --plugin"
        )
    return out


def _described(folder: Path, entry: dict[str, Any]) -> str:
    """An entry as the refusal lists it: file and SHA-256 (or module), and its names."""
    names = ", ".join(entry["registers"]) or "no component"
    if "file" in entry:
        return f"{folder.name}/{entry['file']} (SHA-256 {entry['sha256']}): {names}"
    return f"module {entry['module']}: {names}"


def _users_own(names: list[tuple[str, ...]]) -> bool:
    """Whether every name (at least one) comes from code the user gave this process: an
    installed package's entry point, or a plugin imported here. A built-in name is no
    plugin's, and an entry that registers nothing has nothing to be provided."""
    given = {n for plugin in loaded() for n in plugin.registers}
    return bool(names) and all(
        kind in KINDS and (name in KINDS[kind].packaged or f"{kind} {name}" in given)
        for kind, name in names
    )


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
