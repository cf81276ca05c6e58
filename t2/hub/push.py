"""A run's checkpoint as a saved folder with its model card (t2 save), and that folder
uploaded to the Hugging Face Hub (t2 push) with HfApi.create_repo and upload_folder."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from t2 import __version__
from t2.errors import CheckpointError, ConfigError
from t2.hub.card import model_card
from t2.hub.pretrained import FILES, is_pretrained, load_folder, save_pretrained


def save_run(path: str | Path, out: str | Path, name: str | None = None) -> Path:
    """Write the checkpoint of a run directory (its best, else latest) or a checkpoint
    folder to `out`, with a model card naming `name` (a repo id; default: `out`)."""
    from t2.model.summary import count_parameters
    from t2.rundir import load_run

    if is_pretrained(path):
        raise CheckpointError(f"{path} is already a saved model folder; push or copy it as it is")
    model, cfg, tokenizer, ckpt = load_run(path)
    card = model_card(ckpt, cfg, count_parameters(model), name or str(out))
    source = {"checkpoint": Path(ckpt).name}
    return save_pretrained(model, cfg, tokenizer, out, card, source)


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


def push(
    path: str | Path, repo_id: str, *, private: bool = False, message: str | None = None,
    out: str | Path | None = None, api: Any = None,
) -> str:  # fmt: skip
    """Upload a run's checkpoint (saved with its card first, into `out` or a temporary
    folder) or an already saved folder to `repo_id`; the commit's URL. `api`: an
    huggingface_hub.HfApi (default: one with the stored token)."""
    check_repo_id(repo_id)
    message = message or f"t2 {__version__}: {Path(path).name}"
    if api is None:
        from huggingface_hub import HfApi

        check_token()
        api = HfApi(library_name="t2")
    if is_pretrained(path):
        load_folder(path)  # a folder that does not load is refused before the upload
        return _upload(api, Path(path), repo_id, private, message)
    if out is not None:
        return _upload(api, save_run(path, out, repo_id), repo_id, private, message)
    with tempfile.TemporaryDirectory(prefix="t2-push-") as tmp:
        folder = save_run(path, Path(tmp) / "model", repo_id)
        return _upload(api, folder, repo_id, private, message)


def _upload(api: Any, folder: Path, repo_id: str, private: bool, message: str) -> str:
    from huggingface_hub.utils import HfHubHTTPError

    try:
        api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        info = api.upload_folder(
            repo_id=repo_id, folder_path=str(folder), repo_type="model",
            commit_message=message, allow_patterns=list(FILES),
        )  # fmt: skip
    except (HfHubHTTPError, OSError) as err:
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise CheckpointError(
            f"uploading {folder} to {repo_id} failed ({reason}); check the token's write "
            f"access and the connection, then run t2 push again"
        ) from None
    return str(getattr(info, "commit_url", None) or info)
