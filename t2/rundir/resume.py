"""Which checkpoint a resumed run starts from: the latest complete one (`--resume`), or one
the user names (`--resume STEP` or `--resume PATH`, as torchtitan's and the transformers
Trainer's resume options). Starting from an earlier one sets the later checkpoints aside
(renamed `.abandoned-step-N`, never deleted), so that "latest" and "best" stay true."""

from __future__ import annotations

from pathlib import Path

from t2.errors import CheckpointError
from t2.rundir.layout import BEST, RunDir, is_complete, step_of


def resume_point(run: RunDir, spec: bool | str | None) -> Path | None:
    """The checkpoint to resume `run` from (None: no complete checkpoint, or no resume)."""
    if not spec:
        return None
    if spec is True or spec == "latest":
        return run.latest()
    ckpt = run.checkpoint(int(spec)) if str(spec).isdigit() else Path(spec)
    if ckpt.resolve().parent != run.checkpoint_dir.resolve():
        raise CheckpointError(
            f"--resume {spec}: {ckpt} is not a checkpoint of {run.path}; "
            f"name a step or a folder in {run.checkpoint_dir}"
        )
    if not is_complete(ckpt):
        have = ", ".join(str(step_of(c)) for c in run.checkpoints()) or "none"
        raise CheckpointError(
            f"--resume {spec}: {ckpt} is not a complete checkpoint; "
            f"complete ones are at steps {have}"
        )
    return run.checkpoint(step_of(ckpt) or 0)


def set_aside_after(run: RunDir, ckpt: Path) -> list[Path]:
    """Rename the checkpoints after `ckpt` to `.abandoned-NAME`; drop a best marker that
    named one of them. Returns what was set aside."""
    step = step_of(ckpt) or 0
    later = [c for c in run.checkpoints() if (step_of(c) or 0) > step]
    marker = run.checkpoint_dir / BEST
    best = run.best()
    for c in later:
        c.rename(c.with_name(f".abandoned-{c.name}"))
    if best in later and marker.is_file():
        marker.unlink()
    return later
