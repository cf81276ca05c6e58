"""List the components of every kind and where each comes from:
t2 components [--kind KIND] [--plugin FILE_OR_MODULE ...].

One row a name: its kind (positional, norm, ffn, attention, search, export), the name a
config or flag gives it, and its origin: `built in` (a file of t2's package), `plugin file
PATH` or a module's name (--plugin, a recipe's or sweep file's plugins:), or `package NAME
VERSION` (an installed package's entry point in the group t2.components). Listing imports
no component; only the plugins given are imported (docs/components.md)."""

from __future__ import annotations

import argparse

from t2.registry import KINDS

HELP = "list every component of every kind and where it comes from (built in, plugin, package)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kind", choices=list(KINDS), help="only this kind (default: all)")


def rows(kind: str | None = None) -> list[tuple[str, str, str, str]]:
    """(kind, name, what chooses it, origin) of every registered name, kind by kind."""
    chosen = [KINDS[kind]] if kind else list(KINDS.values())
    out = []
    for registry in chosen:
        key = registry.kind.partition("(")[2].rstrip(")") or registry.key
        out += [(registry.key, name, key, registry.origin(name)) for name in registry.names()]
    return out


def run(args: argparse.Namespace) -> None:
    found = rows(args.kind)
    header = ("kind", "name", "chosen by", "origin")
    widths = [max(len(r[i]) for r in [header, *found]) for i in range(3)]
    for row in [header, *found]:
        cells = [cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True)]
        print("  ".join([*cells, row[3]]))
