"""A local folder standing in for the Hugging Face Hub's cache (no tests here)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from huggingface_hub.file_download import repo_folder_name


def cache_repo(folder: Path, repo_id: str, cache: Path) -> Path:
    """The hub cache's layout as snapshot_download leaves it: blobs named by their hash,
    snapshots/<commit>/ of links to them, refs/main naming the commit."""
    root = cache / repo_folder_name(repo_id=repo_id, repo_type="model")
    commit = hashlib.sha1(repo_id.encode()).hexdigest()
    snapshot = root / "snapshots" / commit
    (root / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for file in sorted(f for f in folder.rglob("*") if f.is_file()):  # plugins/ too
        blob = root / "blobs" / hashlib.sha256(file.read_bytes()).hexdigest()
        shutil.copyfile(file, blob)
        link = snapshot / file.relative_to(folder)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(commit)
    return snapshot
