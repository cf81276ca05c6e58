"""Writing and reading checkpoints: atomic writes, checksums, weights through safetensors.

A checkpoint is assembled in `checkpoints/.tmp-step-N-*/` (t2.atomic) and renamed to
`step-N/` after its `meta.json` (with the SHA-256 of each file) and `COMPLETE` marker are
written, so a process killed mid-write leaves only a `.tmp-` folder, never loaded and
removed by the next save.
Weights load through safetensors and the training state with `weights_only=True`: no pickle.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from t2.atomic import atomic_folder, sha256
from t2.config import Config
from t2.errors import CheckpointError, DiskFullError, T2Error
from t2.model.transformer import Transformer
from t2.rundir.layout import (
    COMPLETE,
    CONFIG,
    FIRST_RESUMABLE,
    META,
    STATE,
    TOKENIZER,
    WEIGHTS,
    RunDir,
    new_meta,
    read_meta,
    resolve,
    write_json,
)
from t2.rundir.plugins import load_kept

STATE_KEYS = ("step", "optimizer", "scheduler", "rng", "data")


def unique_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The state dict with each tied tensor once, under its first name (what is stored)."""
    state, seen = {}, set()
    for name, tensor in model.state_dict(keep_vars=True).items():
        if id(tensor) not in seen:
            seen.add(id(tensor))
            state[name] = tensor
    return state


def save_weights(state: dict[str, torch.Tensor], folder: Path) -> None:
    """Weights as safetensors; tied matrices are stored once (safetensors forbids sharing).
    The only writer of t2's weight files: checkpoints, averages and model folders."""
    tensors = {k: v.detach().contiguous().cpu() for k, v in state.items()}
    save_file(tensors, str(folder / WEIGHTS), metadata={"format": "pt"})  # as transformers


def write_folder(
    folder: Path,
    weights: dict[str, torch.Tensor],
    config_yaml: str,
    meta: dict[str, Any],
    state: dict[str, Any] | None = None,
) -> None:
    """A checkpoint's files into `folder`, COMPLETE last: weights, config, state, meta."""
    save_weights(weights, folder)
    (folder / CONFIG).write_text(config_yaml, encoding="utf-8")
    if state is not None:
        torch.save(state, folder / STATE)
    files = {name: sha256(folder / name) for name in (WEIGHTS, STATE) if (folder / name).is_file()}
    write_json(folder / META, {**meta, "sha256": files})
    (folder / COMPLETE).touch()


def save_checkpoint(
    run: RunDir,
    step: int,
    model: torch.nn.Module,
    cfg: Config,
    state: dict[str, Any],
    keep_last: int,
    best: bool = False,
    world_size: int = 1,
) -> Path:
    """Write step-N atomically, mark it as the best if `best`, then prune all but the last
    `keep_last` and the best (marked first, so that the best it replaces is pruned now)."""
    run.checkpoint_dir.mkdir(parents=True, exist_ok=True)
    for stale in run.checkpoint_dir.glob(".tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    final = run.checkpoint(step)
    meta = new_meta(world_size, step=step)
    with full_disk_resumes(run), atomic_folder(final) as tmp:  # .tmp-step-N-*: never read
        write_folder(tmp, unique_state(model), cfg.to_yaml(), meta, state)
    if best:
        run.mark_best(final)
    best_now = run.best()
    complete = run.checkpoints()
    for old in complete[: max(0, len(complete) - keep_last)]:
        if old != best_now:
            shutil.rmtree(old, ignore_errors=True)
    return final


@contextlib.contextmanager
def full_disk_resumes(run: RunDir) -> Iterator[None]:
    """A full disk anywhere in a run's writes (t2.atomic.writing) names the newest intact
    checkpoint to --resume from: the one line a user of a training run reads."""
    try:
        yield
    except DiskFullError as err:
        intact = run.latest()
        then = (
            f"{intact} is intact: free space (or lower train.keep_last) and --resume"
            if intact
            else "no checkpoint was written yet: free space and run it again"
        )
        raise err.resumable(then) from None


def verified(ckpt: Path, name: str) -> Path:
    """A file of a checkpoint whose SHA-256 matches its meta.json (format 1: unchecked)."""
    path = Path(ckpt) / name
    expected = read_meta(ckpt).get("sha256", {}).get(name)
    if not path.is_file():
        raise CheckpointError(f"{path} is missing; use another checkpoint")
    if expected is not None and sha256(path) != expected:
        raise CheckpointError(
            f"{path} does not match the checksum in {Path(ckpt) / META} (changed or damaged "
            f"after it was written); use another checkpoint"
        )
    return path


def load_weights(model: torch.nn.Module, ckpt: Path) -> None:
    """Load safetensors weights; any difference of names or shapes is another architecture."""
    try:
        state = load_file(str(verified(ckpt, WEIGHTS)))
    except T2Error:
        raise
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


def load_training_state(ckpt: Path) -> dict[str, Any]:
    """The optimizer, scheduler, RNG and data state saved with a checkpoint (no pickle)."""
    meta = read_meta(ckpt)
    if meta["format"] < FIRST_RESUMABLE:
        raise CheckpointError(
            f"{ckpt} is run-directory format {meta['format']} (t2 {meta['t2']}), whose data "
            f"position counts one process's batches; this t2 resumes format {FIRST_RESUMABLE} "
            f"or later: evaluate or translate with it, or finish the run with t2 {meta['t2']}"
        )
    path = verified(ckpt, STATE)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # truncated, corrupt, or a pickle of other objects
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointError(
            f"cannot read {path} ({reason}); resume from another checkpoint"
        ) from None
    missing = [k for k in STATE_KEYS if not isinstance(state, dict) or k not in state]
    if missing:
        raise CheckpointError(
            f"{path} lacks {', '.join(missing)}; it cannot resume: use another checkpoint"
        )
    return state


def read_config(ckpt: Path, trust_plugins: bool = False) -> Config:
    """A checkpoint's config, after the plugins its run keeps (their names are in it): a
    run's own copies, a downloaded run's only with `trust_plugins` (may_run_kept)."""
    path = Path(ckpt) / CONFIG
    if not path.is_file():
        raise CheckpointError(f"checkpoint {ckpt} has no {CONFIG}; it was not written by t2")
    load_kept(ckpt, trust_plugins, own=True)
    return Config.from_yaml(path.read_text(encoding="utf-8"), str(path), saved=True)


def load_model(
    path: str | Path, device: str | torch.device = "cpu", trust_plugins: bool = False
) -> tuple[Transformer, Config]:
    """The model of a checkpoint (or of a run directory's best one) with its config (and
    its plugins: read_config)."""
    ckpt = resolve(path)
    cfg = read_config(ckpt, trust_plugins)
    model = Transformer(cfg.model)
    load_weights(model, ckpt)
    return model.to(device).eval(), cfg


def tokenizer_folder(ckpt: Path, cfg: Config) -> Path:
    """The tokenizer of a checkpoint: beside it (an exported average), in its run directory,
    or the one the config names (data.tokenizer)."""
    for folder in (Path(ckpt) / TOKENIZER, RunDir.of(ckpt).tokenizer):
        if folder.is_dir():
            return folder
    if cfg.data.tokenizer and Path(cfg.data.tokenizer).is_dir():
        return Path(cfg.data.tokenizer)
    raise CheckpointError(
        f"no {TOKENIZER}/ folder beside {ckpt} or in its run directory; pass a checkpoint "
        f"inside a run directory written by train.py"
    )
