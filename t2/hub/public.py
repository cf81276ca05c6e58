"""What a folder that leaves this machine may say of it: an exported or pushed folder's
config (config.json, a CTranslate2 export's t2_export.json) and its model card name no
local folder. An absolute local path (`/home/me/x`, `~/x`, `files:/data/wmt/test`) shows by
its last name (`x`, `files:test`); the run's own config.yaml keeps its paths. An exported
model needs none of them: its tokenizer is in the folder, and data paths only say what
the run read (docs/hub.md, "What a folder publishes")."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def public(value: str) -> str:
    """A config value as a published folder may hold it (see the module doc)."""
    scheme, colon, rest = value.partition(":") if ":" in value else ("", "", value)
    if not colon or "/" in scheme:  # no scheme, or a path with a colon in it
        scheme, colon, rest = "", "", value
    if not Path(rest).expanduser().is_absolute():
        return value
    return f"{scheme}{colon}{Path(rest).name}"


def published(record: Any) -> Any:
    """`record` (a config's dict, a provenance record) with every string made public."""
    if isinstance(record, dict):
        return {key: published(value) for key, value in record.items()}
    if isinstance(record, (list, tuple)):
        return [published(value) for value in record]
    return public(record) if isinstance(record, str) else record
