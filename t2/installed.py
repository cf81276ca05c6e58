"""What installed packages declare for t2: the entry points of a group (t2.registry reads
`t2.components`), through importlib.metadata, and the package each comes from.

importlib.metadata costs 30-90 ms to import on 2 busy cores (email, zipfile, csv), a third
of `t2 --help`, which reads the registries' names for its choices. So the entry_points.txt
of each dist-info and egg-info folder on sys.path (what importlib.metadata reads) are
looked at first (~1 ms), and the library is imported only when one of them names the
group. A zip on sys.path is not looked into: it may declare it.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Any


def declared(group: str) -> bool:
    """Whether an installed distribution may declare entry points in `group`."""
    for entry in sys.path:
        folder = entry or "."
        if os.path.isfile(folder):
            return True
        if not os.path.isdir(folder):
            continue
        with os.scandir(folder) as found:
            metadata = [d.path for d in found if d.name.endswith((".dist-info", ".egg-info"))]
        for meta in metadata:
            with contextlib.suppress(OSError):
                text = Path(meta, "entry_points.txt").read_text(encoding="utf-8", errors="replace")
                if f"[{group}]" in text:
                    return True
    return False


def entry_points(group: str) -> list[Any]:
    """The entry points of `group` (importlib.metadata's), or none without reading them."""
    if not declared(group):
        return []
    from importlib import metadata  # a stdlib import: only when a package declares the group

    return list(metadata.entry_points(group=group))


def package_of(offer: Any) -> str:
    """The distribution (name and version) an entry point comes from."""
    dist = offer.dist
    return f"{dist.name} {dist.version}" if dist is not None else offer.value
