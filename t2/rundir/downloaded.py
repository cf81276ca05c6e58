"""Where a folder came from: the Hugging Face Hub (a snapshot in the hub's cache, or a
`hf download --local-dir` folder) or this machine. A downloaded folder is never a run
whose kept plugins run without the opt-in (t2.rundir.plugins.may_run_kept); it lives
below t2.hub, which downloads, so that the run folder's readers can ask it."""

from __future__ import annotations

from pathlib import Path

# what `hf download --local-dir DIR` keeps in DIR (its metadata: DIR/.cache/huggingface/
# download/FILE.metadata); ~/.cache/huggingface, the hub's own home, holds no download/
LOCAL_DIR_MARK = (".cache", "huggingface", "download")


def hub_repo_cache(folder: str | Path) -> Path | None:
    """The repo cache (.../models--OWNER--NAME) that `folder` lies in a snapshot of
    (.../models--OWNER--NAME/snapshots/REVISION/...), through symbolic links too; else None."""
    path = Path(folder).absolute()
    for chain in (path, path.resolve()):
        for above in (chain, *chain.parents):
            snapshots = above.parent
            if snapshots.name == "snapshots" and snapshots.parent.name.startswith("models--"):
                return snapshots.parent
    return None


def is_downloaded(folder: str | Path) -> bool:
    """Whether `folder` came from the Hugging Face Hub: inside a snapshot of a hub cache
    (hub_repo_cache), or inside a `hf download --local-dir` folder (it keeps
    .cache/huggingface/download/): the folder itself, a run in it or a checkpoint of one.
    Every folder above is looked at, as it is and with its links resolved."""
    if hub_repo_cache(folder) is not None:
        return True
    path = Path(folder).absolute()
    return any(
        above.joinpath(*LOCAL_DIR_MARK).is_dir()
        for chain in (path, path.resolve())
        for above in (chain, *chain.parents)
    )
