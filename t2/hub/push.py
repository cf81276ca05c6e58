"""A saved model folder uploaded to the Hugging Face Hub (t2 push) with HfApi.create_repo and
upload_folder; t2.exporting saves a run's checkpoint as such a folder first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from t2 import __version__
from t2.errors import CheckpointError, ConfigError
from t2.hub.layout import FILES


def check_repo_id(repo_id: str) -> None:
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError as err:
        reason = str(err).strip().splitlines()[0]
        raise ConfigError(f"{repo_id!r} is not a hub repo id ({reason}); pass owner/name") from None
    if "/" not in repo_id:
        raise ConfigError(f"{repo_id!r} has no owner; pass owner/name (your user or organisation)")


def check_token() -> None:
    """Uploading needs a token: HF_TOKEN, or the one `hf auth login` stored."""
    from huggingface_hub import get_token

    if not get_token():
        raise ConfigError(
            "t2 push needs a Hugging Face token with write access: run `hf auth login` or set "
            "HF_TOKEN (t2 save --out DIR writes the same folder without uploading)"
        )


def upload(
    folder: Path,
    repo_id: str,
    *,
    private: bool = False,
    message: str | None = None,
    api: Any = None,
) -> str:
    """Upload a saved model folder (the hf format) to `repo_id`; the commit's URL. `api`:
    an huggingface_hub.HfApi (default: one with the stored token)."""
    check_repo_id(repo_id)
    message = message or f"t2 {__version__}: {Path(folder).name}"
    if api is None:
        from huggingface_hub import HfApi  # a heavy import, only where uploading

        check_token()
        api = HfApi(library_name="t2")
    from huggingface_hub.utils import HfHubHTTPError

    try:
        api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        info = api.upload_folder(
            repo_id=repo_id,
            folder_path=str(folder),
            repo_type="model",
            commit_message=message,
            allow_patterns=list(FILES),
        )
    except (HfHubHTTPError, OSError) as err:
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise CheckpointError(
            f"uploading {folder} to {repo_id} failed ({reason}); check the token's write "
            f"access and the connection, then run t2 push again"
        ) from None
    return str(getattr(info, "commit_url", None) or info)
