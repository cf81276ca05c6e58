"""A model folder from a local path or a Hugging Face Hub repo id, through the hub's cache.

A repo id goes through huggingface_hub.snapshot_download: the cache (HF_HUB_CACHE, by
default ~/.cache/huggingface/hub) first when it is current, the hub otherwise; with
HF_HUB_OFFLINE=1 only the cache. Every failure is one line naming the repo, the cache and
the fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from t2 import __version__
from t2.errors import CheckpointError
from t2.hub.layout import FILES


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def locate(
    name: str | Path,
    revision: str | None = None,
    cache_dir: str | Path | None = None,
    files: Sequence[str] = FILES,
) -> Path:
    """The folder of `name`: a local folder as it is, else the snapshot of a hub repo with
    the `files` it holds (default: the hf format's; t2.formats.choose.hub_files: every format's)."""
    path = Path(name)
    if path.is_dir():
        return path
    if path.exists():
        raise CheckpointError(f"{name} is a file; pass a saved model folder or a hub repo id")
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(str(name))
    except HFValidationError:
        raise CheckpointError(
            f"{name} is neither a folder nor a Hugging Face repo id (owner/name); pass one"
        ) from None
    return _download(str(name), revision, cache_dir, files)


def _download(
    repo_id: str, revision: str | None, cache_dir: str | Path | None, files: Sequence[str]
) -> Path:
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.utils import (
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    cache = Path(cache_dir or constants.HF_HUB_CACHE)
    where = f"no local folder {repo_id}, and as a Hugging Face repo"
    try:
        folder = snapshot_download(
            repo_id,
            revision=revision,
            cache_dir=cache_dir,
            allow_patterns=list(files),
            library_name="t2",
            library_version=__version__,
        )
    except LocalEntryNotFoundError as err:
        if constants.HF_HUB_OFFLINE:
            raise CheckpointError(
                f"{where} it is not in the hub cache {cache} and HF_HUB_OFFLINE=1 forbids "
                f"downloading it; download it once online (unset HF_HUB_OFFLINE) or pass a "
                f"local folder"
            ) from None
        raise CheckpointError(
            f"{where} it is not in the hub cache {cache} and {constants.ENDPOINT} cannot be "
            f"reached ({_first_line(err.__cause__ or err)}); connect, or pass a local folder"
        ) from None
    except (RepositoryNotFoundError, GatedRepoError, RevisionNotFoundError) as err:
        raise CheckpointError(
            f"{where} it cannot be read ({type(err).__name__}); check the id and revision, "
            f"and log in (hf auth login) for a private or gated repo"
        ) from None
    except OSError as err:  # the hub's HTTP errors and a damaged cache
        raise CheckpointError(
            f"cannot fetch {repo_id} from the hub into {cache} ({_first_line(err)}); try "
            f"again, or pass a local folder"
        ) from None
    return Path(folder)
