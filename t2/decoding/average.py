"""Checkpoint averaging: the mean of the last N checkpoints' weights, as Vaswani et al. 2017
(section 6.1) did for the base model (last 5) and fairseq's average_checkpoints.py does."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from t2.checkpoint import COMPLETE, WEIGHTS, is_complete, list_checkpoints, resolve_checkpoint
from t2.config import Config
from t2.errors import CheckpointError


def last_checkpoints(path: str | Path, n: int) -> list[Path]:
    """The last `n` complete checkpoints of a run directory, or the `n` ending at a checkpoint."""
    if n < 1:
        raise CheckpointError(f"cannot average the last {n} checkpoints; pass N >= 1")
    path = Path(path)
    if (path / WEIGHTS).is_file():
        ckpt = resolve_checkpoint(path)
        found = [p for p in list_checkpoints(ckpt.parent.parent) if p.name <= ckpt.name]
    else:
        resolve_checkpoint(path)  # fails with the right message if there is none
        found = list_checkpoints(path)
    if len(found) < n:
        raise CheckpointError(
            f"--average-last {n} needs {n} complete checkpoints but {path} has {len(found)}; "
            f"pass a smaller N"
        )
    return found[-n:]


def _model_config(ckpt: Path) -> Config:
    cfg_file = ckpt / "config.yaml"
    if not cfg_file.is_file():
        raise CheckpointError(f"checkpoint {ckpt} has no config.yaml; it was not written by t2")
    return Config.from_yaml(cfg_file.read_text(encoding="utf-8"), str(cfg_file))


def _open_weights(ckpt: Path):  # noqa: ANN202  (a safetensors file handle)
    try:
        return safe_open(str(ckpt / WEIGHTS), framework="pt")
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


def average_checkpoints(path: str | Path, n: int) -> Path:
    """Write the mean of the last `n` checkpoints as a checkpoint folder beside them
    (checkpoints/avg-last{n}-<newest>) and return it; `load_model` reads it like any other."""
    found = last_checkpoints(path, n)
    newest = found[-1]
    out = newest.parent / f"avg-last{n}-{newest.name}"
    if is_complete(out) and (out / "sources.txt").read_text().split() == [p.name for p in found]:
        return out  # already averaged from the same checkpoints
    models = {_model_config(p).model for p in found}
    if len(models) > 1:
        raise CheckpointError(f"the last {n} checkpoints of {path} differ in model config")
    out.mkdir(exist_ok=True)
    (out / COMPLETE).unlink(missing_ok=True)
    save_file(average_weights(found), str(out / WEIGHTS))
    (out / "config.yaml").write_text((newest / "config.yaml").read_text(encoding="utf-8"))
    (out / "sources.txt").write_text("\n".join(p.name for p in found) + "\n")
    (out / COMPLETE).touch()  # written last, as for every checkpoint
    return out
