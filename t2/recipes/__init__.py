"""Recipes: YAML files beside this module (package data, so an installed t2 has them; the
checkout's top-level recipes/ links here) that name a parent and change a few keys.

A recipe is resolved by merging its parent chain (base first), then `--set` overrides,
then building the typed Config, which checks every key and choice. A recipe's `plugins:`
(files relative to the recipe, or module names; its parents' first) are imported before
the config is built, so that it may name their components: only with `trust_plugins`
(--trust-plugins), or where the user gave each with --plugin (t2.plugins.load_listed).
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from t2.config import Config, check_keys, load_yaml
from t2.errors import ConfigError
from t2.plugins import is_file_spec, load_listed

PLUGINS = "plugins"  # a recipe's key beside its sections

RECIPES_DIR = Path(os.environ.get("T2_RECIPES", Path(__file__).resolve().parent))


def recipe_names() -> list[str]:
    return sorted(p.stem for p in RECIPES_DIR.glob("*.yaml"))


def _recipe_path(name: str) -> Path:
    if name.endswith((".yaml", ".yml")):  # a user's own recipe file
        path = Path(name)
        if not path.is_file():
            raise ConfigError(f"recipe file {name} not found; pass an existing YAML file")
        return path
    path = RECIPES_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(f"unknown recipe {name!r}; valid recipes: {', '.join(recipe_names())}")
    return path


def _deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def load_raw(name: str, _seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """The merged mapping of a recipe and its ancestors (without the `parent` key)."""
    if name in _seen:
        raise ConfigError(f"recipe {name!r} is its own ancestor: {' -> '.join(_seen + (name,))}")
    path = _recipe_path(name)
    try:
        raw = load_yaml(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"recipe {path} is not valid YAML ({err}); fix the file") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"recipe {path} must be a mapping (parent:, model:, ...); fix the file")
    parent = raw.pop("parent", None)
    inherited = load_raw(parent, _seen + (name,)) if parent else {}
    merged = _deep_merge(inherited, raw)
    if PLUGINS in raw:  # the parent's, then this recipe's, each relative to its own file
        merged[PLUGINS] = [*inherited.get(PLUGINS, []), *_plugins(raw, path)]
    return merged


def _plugins(raw: dict[str, Any], path: Path) -> list[str]:
    """A recipe's `plugins:` with each file's path made absolute (relative to the recipe)."""
    specs = raw[PLUGINS]
    if not isinstance(specs, list) or not all(isinstance(s, str) for s in specs):
        raise ConfigError(
            f"recipe {path}: plugins must be a list of .py files (relative to the recipe) or "
            f"module names"
        )
    folder = path.resolve().parent
    return [str(folder / s) if is_file_spec(s) and not Path(s).is_absolute() else s for s in specs]


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply `section.key=value` strings; values are parsed as YAML (4, 0.1, true, [0.9, 0.98])."""
    out = copy.deepcopy(raw)
    for item in overrides:
        key, sep, value = item.partition("=")
        section, dot, field = key.strip().partition(".")
        if not sep or not dot or not field:
            raise ConfigError(f"bad override {item!r}; write --set section.key=value")
        check_keys({section: None}, Config.__dataclass_fields__, "config section")
        try:
            parsed = load_yaml(value) if value else ""
        except yaml.YAMLError:
            raise ConfigError(f"bad override {item!r}: the value is not valid YAML") from None
        _refuse_a_cut_comment(item, value)
        out[section] = {**(out.get(section) or {}), field: parsed}  # a section may be null
    return out


def _refuse_a_cut_comment(item: str, value: str) -> None:
    """A --set value reaches t2 whole (the shell quoted it), so a `#` that YAML reads as a
    comment (after a space, or right after a quoted value or a bracket: `"x"#c`) was meant
    as text: refused, rather than a value silently cut short. A `#` inside a scalar
    (`run#3`, `"/a #b"`, a URL's fragment) is no comment."""
    tokens = [(t.start_mark.index, t.end_mark.index) for t in yaml.scan(value, yaml.SafeLoader)]
    for found in re.finditer("#", value):
        at = found.start()
        if not any(start <= at < end for start, end in tokens):
            key = item.partition("=")[0]
            fix = shlex.quote(f"{key}={json.dumps(value)}")
            raise ConfigError(
                f"bad override {item!r}: YAML reads {value[found.start() :]!r} as a comment; "
                f"quote the value in YAML, e.g. --set {fix}"
            )


def load_config(
    name: str, overrides: list[str] | None = None, trust_plugins: bool = False
) -> Config:
    """The Config of recipe `name` with `overrides`; `trust_plugins`: import the plugins
    the recipe lists (see the module doc)."""
    raw = apply_overrides(load_raw(name), overrides or [])
    load_listed(raw.pop(PLUGINS, []), f"recipe {name}", trust_plugins)
    return Config.from_dict(raw)
