"""Training checkpoints, written atomically.

A checkpoint is assembled in `checkpoints/.tmp-step-N/` and renamed to `step-N/` after
its `COMPLETE` marker is written, so a process killed mid-write leaves only a `.tmp-`
folder, which is never loaded and is removed by the next save. The training state
(optimizer, scheduler, RNG, data position) loads with `weights_only=True`: no pickle.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import torch

from t2.checkpoint import COMPLETE, list_checkpoints, load_weights, save_weights
from t2.config import Config
from t2.errors import CheckpointError

STATE = "training_state.pt"


def rng_state() -> dict[str, Any]:
    state = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(_as_tuple(state["python"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _as_tuple(value: Any) -> Any:
    return tuple(_as_tuple(v) for v in value) if isinstance(value, (list, tuple)) else value


def save_checkpoint(
    run_dir: Path, step: int, model: torch.nn.Module, cfg: Config, state: dict[str, Any],
    keep_last: int, best: bool = False,
) -> Path:  # fmt: skip
    """Write step-N atomically, mark it as the best if `best`, then prune all but the last
    `keep_last` and the best (marked first, so that the best it replaces is pruned now)."""
    folder = Path(run_dir) / "checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob(".tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    final = folder / f"step-{step:07d}"
    tmp = folder / f".tmp-{final.name}"
    tmp.mkdir()
    save_weights(model, tmp)
    (tmp / "config.yaml").write_text(cfg.to_yaml(), encoding="utf-8")
    torch.save(state, tmp / STATE)
    (tmp / COMPLETE).touch()
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    if best:
        mark_best(run_dir, final)
    _prune(folder, keep_last)
    return final


def mark_best(run_dir: Path, ckpt: Path) -> None:
    best = Path(run_dir) / "checkpoints" / "best"
    tmp = best.with_suffix(".tmp")
    tmp.write_text(ckpt.name + "\n")
    tmp.replace(best)


def _prune(folder: Path, keep_last: int) -> None:
    best_file = folder / "best"
    best = best_file.read_text().strip() if best_file.is_file() else None
    complete = list_checkpoints(folder.parent)
    for old in complete[: max(0, len(complete) - keep_last)]:
        if old.name != best:
            shutil.rmtree(old, ignore_errors=True)


def latest_checkpoint(run_dir: Path) -> Path | None:
    found = list_checkpoints(run_dir)
    return found[-1] if found else None


def load_training_state(ckpt: Path, model: torch.nn.Module) -> dict[str, Any]:
    """Load weights into `model` and return the saved training state (tensors, no pickle)."""
    load_weights(model, ckpt)
    try:
        return torch.load(ckpt / STATE, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise CheckpointError(f"{ckpt} has no {STATE}; it cannot resume training") from None
