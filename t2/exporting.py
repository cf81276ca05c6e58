"""Exporting: an opened model written in a registered format (`t2 export --format hf|ct2`,
`t2 save` for hf), and a run's checkpoint saved as a model folder and uploaded to the
Hugging Face Hub (`t2 push`)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from t2 import __version__
from t2.errors import ConfigError
from t2.formats.choose import export_format
from t2.hub.pretrained import is_pretrained, load_folder
from t2.hub.push import check_repo_id, upload
from t2.opener import open_model


def export(
    target: str | Path,
    fmt: str,
    out: str | Path,
    *,
    average_last: int = 0,
    trust_plugins: bool = False,
    **options: Any,
) -> Path:
    """Write the model `target` opens to (a run's best checkpoint, a checkpoint, a saved
    folder; with `average_last` N, a run's last N averaged) in format `fmt` at `out`;
    `options` are the format's own (ct2: quantization; hf: name); `trust_plugins`: a
    saved folder's plugin code may run (t2.rundir.plugins). The export carries the
    plugins the run keeps."""
    writer = export_format(fmt)
    given = {k: v for k, v in options.items() if v is not None}
    unknown = sorted(set(given) - set(writer.options))
    if unknown:
        flags = ", ".join("--" + k.replace("_", "-") for k in unknown)
        raise ConfigError(f"{flags} is not an option of --format {fmt}; leave it out")
    opened = open_model(target, average_last=average_last, trust_plugins=trust_plugins)
    return writer.save(opened, Path(out), **given)


def save_run(path: str | Path, out: str | Path, name: str | None = None) -> Path:
    """A run's checkpoint as a model folder with its model card (the hf format), whose
    card's example loads `name` (a repo id; default: `out`)."""
    return export(path, "hf", out, name=name)


def push(
    path: str | Path,
    repo_id: str,
    *,
    private: bool = False,
    message: str | None = None,
    out: str | Path | None = None,
    api: Any = None,
    trust_plugins: bool = False,
) -> str:
    """Upload a run's checkpoint (saved with its card first, into `out` or a temporary
    folder) or an already saved folder to `repo_id`; the commit's URL. `trust_plugins`: a
    saved folder's plugin code may run when it is loaded as a check."""
    check_repo_id(repo_id)
    message = message or f"t2 {__version__}: {Path(path).name}"
    if is_pretrained(path):
        load_folder(path, trust_plugins=trust_plugins)  # refused before the upload if it fails
        return upload(Path(path), repo_id, private=private, message=message, api=api)
    if out is not None:
        folder = save_run(path, out, repo_id)
        return upload(folder, repo_id, private=private, message=message, api=api)
    with tempfile.TemporaryDirectory(prefix="t2-push-") as tmp:
        folder = save_run(path, Path(tmp) / "model", repo_id)
        return upload(folder, repo_id, private=private, message=message, api=api)
