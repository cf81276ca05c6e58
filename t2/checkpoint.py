"""Run directories and model checkpoints.

A run directory holds `config.yaml` (the resolved config), `tokenizer/` (a folder that
`PreTrainedTokenizerFast.from_pretrained` loads) and `checkpoints/step-NNNNNNN/`, each
with `model.safetensors`, `config.yaml` and, written last, an empty `COMPLETE` marker:
a folder without it was cut off while being written and is never loaded.
Weights load through safetensors only, never through pickle.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from t2.config import Config
from t2.errors import CheckpointError
from t2.model.transformer import Transformer

COMPLETE = "COMPLETE"
WEIGHTS = "model.safetensors"


def is_complete(ckpt: Path) -> bool:
    return (ckpt / COMPLETE).is_file() and (ckpt / WEIGHTS).is_file()


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first."""
    folder = Path(run_dir) / "checkpoints"
    return sorted(p for p in folder.glob("step-*") if p.is_dir() and is_complete(p))


def resolve_checkpoint(path: str | Path) -> Path:
    """A checkpoint folder from a run directory (its best, else latest) or a checkpoint path."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"checkpoint {path} not found; pass a run directory or checkpoint")
    if (path / WEIGHTS).is_file():
        if not is_complete(path):
            raise CheckpointError(f"checkpoint {path} is incomplete (no {COMPLETE} marker)")
        return path
    best = path / "checkpoints" / "best"
    if best.is_file():  # holds the name of the best checkpoint's folder
        candidate = path / "checkpoints" / best.read_text().strip()
        if is_complete(candidate):
            return candidate
    found = list_checkpoints(path)
    if not found:
        raise CheckpointError(f"no complete checkpoint under {path}; train first or pass one")
    return found[-1]


def unique_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The state dict with each tied tensor once, under its first name (what is stored)."""
    state, seen = {}, set()
    for name, tensor in model.state_dict(keep_vars=True).items():
        if id(tensor) not in seen:
            seen.add(id(tensor))
            state[name] = tensor
    return state


def save_weights(model: torch.nn.Module, ckpt: Path) -> None:
    """Weights as safetensors; tied matrices are stored once (safetensors forbids sharing)."""
    state = {k: v.detach().contiguous().cpu() for k, v in unique_state(model).items()}
    save_file(state, str(ckpt / WEIGHTS))


def load_weights(model: torch.nn.Module, ckpt: Path) -> None:
    """Load safetensors weights; any difference of names or shapes is another architecture."""
    try:
        state = load_file(str(Path(ckpt) / WEIGHTS))
    except Exception as err:  # corrupt or truncated file
        raise CheckpointError(
            f"cannot read {ckpt / WEIGHTS} ({err}); use another checkpoint"
        ) from None
    expected = unique_state(model)
    for name in sorted(set(state) | set(expected)):
        got, want = state.get(name), expected.get(name)
        if got is None or want is None or got.shape != want.shape:
            found = "absent" if got is None else tuple(got.shape)
            wanted = "absent" if want is None else tuple(want.shape)
            raise CheckpointError(
                f"checkpoint {ckpt} does not fit this architecture ({name}: {found} in the "
                f"checkpoint, {wanted} in the model); load it with the config it was trained with"
            )
    model.load_state_dict(state, strict=False)


def load_model(path: str | Path, device: str | torch.device = "cpu") -> tuple[Transformer, Config]:
    """The model of a checkpoint (or of a run directory's best one) with its config."""
    ckpt = resolve_checkpoint(path)
    cfg_file = ckpt / "config.yaml"
    if not cfg_file.is_file():
        raise CheckpointError(f"checkpoint {ckpt} has no config.yaml; it was not written by t2")
    cfg = Config.from_yaml(cfg_file.read_text(encoding="utf-8"), str(cfg_file))
    model = Transformer(cfg.model)
    load_weights(model, ckpt)
    return model.to(device).eval(), cfg
