"""Where a run's numbers go: metrics.jsonl in the run directory and W&B (offline by default)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from accelerate import Accelerator

from t2.atomic import writing
from t2.config import Config
from t2.errors import ConfigError
from t2.rundir import RunDir, read_records, rewrite_records


class MetricsLog:
    """One JSON object per logged step or evaluation, appended to RUN/metrics.jsonl."""

    def __init__(self, path: Path, resume_step: int | None) -> None:
        self.path = Path(path)
        if resume_step is not None and self.path.is_file():
            # drop what was logged after the checkpoint (and a line a kill cut off), so the
            # log matches an uninterrupted run
            kept = [r for r in read_records(self.path) if r.get("step", 0) <= resume_step]
            rewrite_records(self.path, kept)
        elif self.path.exists():
            self.path.unlink()

    def write(self, record: dict[str, Any]) -> None:
        """Append one line, whole or not at all: a write that fails (a full disk) cuts the
        file back to where it was."""
        data = (json.dumps(record) + "\n").encode("utf-8")
        with writing(self.path, self.path.parent):
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            start = os.fstat(fd).st_size
            try:
                while data:
                    data = data[os.write(fd, data) :]
            except BaseException:
                os.ftruncate(fd, start)
                raise
            finally:
                os.close(fd)


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    return read_records(RunDir(run_dir).metrics)


def init_wandb(
    accelerator: Accelerator, cfg: Config, recipe: str, run_dir: Path, mode: str
) -> None:
    """W&B through Accelerate's tracker: the group is train.wandb_group or the recipe, so
    runs of one recipe (or one arm's seeds) group together and compare side by side; the
    name is train.wandb_name or the run directory's; offline needs no account."""
    if mode == "disabled":
        return
    from wandb.errors import Error as WandbError

    os.environ.setdefault("WANDB_SILENT", "true")
    train = cfg.train
    model = cfg.model
    tags = [recipe, model.positional, model.norm, model.ffn, model.norm_position, model.residual]
    wandb_args = {
        "mode": mode,
        "group": train.wandb_group or recipe,
        "tags": tags,
        "name": train.wandb_name or Path(run_dir).name,
        "dir": str(run_dir),
    }
    if train.wandb_job_type:
        wandb_args["job_type"] = train.wandb_job_type
    try:
        accelerator.init_trackers(
            project_name=os.environ.get("WANDB_PROJECT", "t2"),
            config={**cfg.to_dict(), "recipe": recipe},
            init_kwargs={"wandb": wandb_args},
        )
    except WandbError as err:  # e.g. online without `wandb login`
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ConfigError(
            f"W&B {mode} could not start ({reason}); run `wandb login` or set WANDB_API_KEY, "
            f"or pass --wandb offline (the default) or --wandb disabled"
        ) from None
