"""Checkpoint averaging: the mean of the last N checkpoints' weights, as Vaswani et al. 2017
(section 6.1) did for the base model (last 5) and fairseq's average_checkpoints.py does."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch
from safetensors import safe_open

from t2.atomic import atomic_folder
from t2.errors import CheckpointError, T2Error
from t2.rundir.layout import (
    CONFIG,
    TOKENIZER,
    WEIGHTS,
    RunDir,
    is_complete,
    new_meta,
    read_meta,
    resolve,
)
from t2.rundir.plugins import carry_plugins
from t2.rundir.store import read_config, tokenizer_folder, verified, write_folder


def last_checkpoints(path: str | Path, n: int) -> list[Path]:
    """The last `n` complete checkpoints of a run directory, or the `n` ending at a checkpoint."""
    if n < 1:
        raise CheckpointError(f"cannot average the last {n} checkpoints; pass N >= 1")
    path = Path(path)
    if (path / WEIGHTS).is_file():
        ckpt = resolve(path)  # fails with the right message if it is incomplete
        return RunDir.of(ckpt).last(n, until=ckpt)
    if not path.exists() or not RunDir(path).checkpoints():  # the best marker plays no part
        resolve(path)  # fails with the right message
    return RunDir(path).last(n)


def _open_weights(ckpt: Path):  # noqa: ANN202  (a safetensors file handle)
    try:
        return safe_open(str(verified(ckpt, WEIGHTS)), framework="pt")
    except T2Error:
        raise
    except Exception as err:  # not safetensors (e.g. a pickle), truncated or corrupt
        raise CheckpointError(
            f"cannot read {ckpt / WEIGHTS} ({err}); use another checkpoint"
        ) from None


def average_weights(checkpoints: list[Path]) -> dict[str, torch.Tensor]:
    """Element-wise mean (accumulated in float64) of the checkpoints' safetensors weights."""
    total: dict[str, torch.Tensor] = {}
    dtypes: dict[str, torch.dtype] = {}
    for ckpt in checkpoints:
        with _open_weights(ckpt) as f:
            names = set(f.keys())
            if total and names != set(total):
                raise CheckpointError(
                    f"checkpoint {ckpt} has other weights than {checkpoints[0]}; "
                    f"average checkpoints of one run only"
                )
            for name in names:
                tensor = f.get_tensor(name)
                if name not in total:
                    total[name], dtypes[name] = tensor.double(), tensor.dtype
                elif tensor.shape != total[name].shape:
                    raise CheckpointError(f"{name} differs in shape in {ckpt}; use one run")
                else:
                    total[name] += tensor.double()
    return {k: (v / len(checkpoints)).to(dtypes[k]) for k, v in total.items()}


def _meta(folder: Path) -> dict:
    try:
        return read_meta(folder)
    except CheckpointError:
        return {}


def average_checkpoints(
    path: str | Path, n: int, out: str | Path | None = None, trust_plugins: bool = False
) -> Path:
    """Write the mean of the last `n` checkpoints as a checkpoint folder and return it: by
    default beside them (checkpoints/avg-last{n}-<newest>), else at `out` with the run's
    tokenizer copied in, so the folder is self-contained. `load_model` reads it like any other."""
    found = last_checkpoints(path, n)
    newest = found[-1]
    folder = Path(out) if out else newest.parent / f"avg-last{n}-{newest.name}"
    sources = [p.name for p in found]
    if is_complete(folder) and read_meta(folder).get("averaged") == sources and not out:
        return folder  # already averaged from the same checkpoints
    if out and folder.exists() and any(folder.iterdir()) and "averaged" not in _meta(folder):
        raise CheckpointError(
            f"--out {folder} exists and is not an averaged checkpoint; pass a new folder"
        )
    # the run's plugins first (a downloaded run's only with trust_plugins): an average
    # carries them as its own, and their names are in each config
    if len({read_config(p, trust_plugins).model for p in found}) > 1:
        raise CheckpointError(f"the last {n} checkpoints of {path} differ in model config")
    cfg_text = (newest / CONFIG).read_text(encoding="utf-8")
    meta = new_meta(read_meta(newest).get("world_size", 1), averaged=sources)
    with atomic_folder(folder) as tmp:
        if out:  # self-contained: the run's tokenizer and plugins
            shutil.copytree(
                tokenizer_folder(newest, read_config(newest, trust_plugins)), tmp / TOKENIZER
            )
            carry_plugins(newest, tmp)
        write_folder(tmp, average_weights(found), cfg_text, meta)
    return folder
