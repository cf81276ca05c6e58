"""The typed-section machinery every config section shares: fields with choices checked
against a fixed list or a registry, values coerced from YAML or failing in one line, and
command-line flags generated from the fields (a section's fields are its only spelling).

Each section lives beside what it configures (t2.model.config, t2.decoding.options,
t2.config for data and training); t2.config assembles them.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import types
import typing
from dataclasses import field
from typing import Any, ClassVar

import yaml

from t2.errors import ConfigError
from t2.registry import Registry


class _Loader(yaml.SafeLoader):
    """YAML with 1e-3 read as a float: PyYAML follows YAML 1.1, where a float needs a dot
    (1.0e-3), so `--set train.max_lr=1e-3` would arrive as the string '1e-3'."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)[eE][-+]?[0-9]+$"),
    list("-+.0123456789"),
)


def load_yaml(text: str) -> Any:
    """Parse recipe, override and saved-config YAML (safe: plain data only)."""
    return yaml.load(text, Loader=_Loader)  # a SafeLoader subclass: plain data only


def choice(default: str, *choices: str, help: str = "", **meta: Any) -> Any:  # noqa: A002
    """A string field with its valid values; `meta`: what else its section records of it."""
    return field(default=default, metadata={"choices": (default, *choices), "help": help, **meta})


def component(default: str, registry: Registry, help: str = "") -> Any:  # noqa: A002
    return field(default=default, metadata={"registry": registry, "help": help})


def option(default: Any, help: str, *aliases: str, **meta: Any) -> Any:  # noqa: A002
    """A plain field with the help its command-line flag shows; `aliases` are extra flags;
    `meta`: what else its section records of it."""
    return field(default=default, metadata={"help": help, "aliases": aliases, **meta})


class Section:
    """Validation shared by all sections: choices, registries and value types."""

    SECTION: ClassVar[str] = ""  # the section's name in a config ("model", "decode", ...)

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            where = f"{self.SECTION}.{f.name}"
            object.__setattr__(self, f.name, _coerce(value, hints[f.name], where))
            if "registry" in f.metadata:
                f.metadata["registry"].check(value)
            if "choices" in f.metadata and value not in f.metadata["choices"]:
                valid = ", ".join(sorted(set(f.metadata["choices"])))
                raise ConfigError(f"invalid {where} {value!r}; valid choices: {valid}")

    def _at_least(self, low: float, *names: str) -> None:
        """Each named number must be at least `low`: a bad count fails here, not mid-run."""
        for name in names:
            if getattr(self, name) < low:
                where = f"{self.SECTION}.{name}"
                raise ConfigError(f"{where} must be at least {low}, got {getattr(self, name)}")


AUTO = "auto"


def count_or_auto(section: Section, name: str, low: int) -> None:
    """A key that is a whole number >= low, or `auto` (resolved by t2.train.plan)."""
    value = getattr(section, name)
    if value == AUTO:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        where = f"{section.SECTION}.{name}"
        raise ConfigError(f"{where} must be a whole number >= {low} or auto, got {value!r}")


def _coerce(value: Any, hint: Any, where: str) -> Any:
    """Accept a YAML value for a field of type `hint`, or fail with a one-line reason."""
    origin = typing.get_origin(hint)
    if origin is tuple:
        if not isinstance(value, (list, tuple)) or len(value) != len(typing.get_args(hint)):
            raise ConfigError(f"{where} must be a list of {len(typing.get_args(hint))} numbers")
        return tuple(
            _coerce(v, t, where) for v, t in zip(value, typing.get_args(hint), strict=True)
        )
    if origin in (typing.Union, types.UnionType):
        return value
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, bool) != (hint is bool) or not isinstance(value, hint):
        raise ConfigError(
            f"{where} must be {hint.__name__}, got {value!r} ({type(value).__name__})"
        )
    return value


def check_keys(raw: dict[str, Any], valid: Any, what: str) -> None:
    for key in raw:
        if key not in valid:
            raise ConfigError(f"unknown {what} {key!r}; valid keys: {', '.join(sorted(valid))}")


def flag(name: str) -> str:
    """The command-line flag of a field: beam_size -> --beam-size."""
    return "--" + name.replace("_", "-")


def add_section_arguments(
    parser: argparse.ArgumentParser, section: type[Section], skip: tuple[str, ...] = ()
) -> None:
    """One flag per field of `section` (but `skip`), its type, choices and help taken from
    the field; a flag left out keeps the value the run chose (default None)."""
    hints = typing.get_type_hints(section)
    for f in dataclasses.fields(section):  # type: ignore[arg-type]
        if f.name in skip:
            continue
        choices = f.metadata.get("choices") or (
            f.metadata["registry"].names() if "registry" in f.metadata else None
        )
        kind = hints[f.name]
        parser.add_argument(
            flag(f.name),
            *f.metadata.get("aliases", ()),
            dest=f.name,
            default=None,
            type=kind if kind in (int, float, str) else None,
            choices=sorted(set(choices)) if choices else None,
            metavar=None if choices else {int: "N", float: "X"}.get(kind, "TEXT"),
            help=f"{section.SECTION}.{f.name}: {f.metadata.get('help', '')} (default: the run's)",
        )


def section_changes(args: argparse.Namespace, section: type[Section]) -> dict[str, Any]:
    """The fields of `section` that the command line sets."""
    names = (f.name for f in dataclasses.fields(section))  # type: ignore[arg-type]
    return {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}
