"""What a training checkpoint holds beyond the weights, and how a run is restored from it.

The state (optimizer, scheduler, RNG, data position, best score, non-finite streak, and
the budget's train_tokens, elapsed_s and last valid_exact_match) is written and read by
t2.rundir; here it is gathered from a run and put back into one.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import torch

from t2.errors import CheckpointError
from t2.rundir import load_training_state, load_weights, save_checkpoint


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


def training_state(
    run: Any, step: int, best: list | None, bad_run: int, budget: dict[str, Any]
) -> dict[str, Any]:
    """Everything beyond the weights that an exact resume needs; `budget` is Budget.state(),
    so a resumed run goes on with its token and time budget."""
    return {
        "step": step,
        "best": best,
        "bad_run": bad_run,
        **budget,
        "optimizer": run.optimizer.state_dict(),
        "scheduler": run.scheduler.state_dict(),
        "rng": rng_state(),
        "data": run.sampler.state_dict(),
        "step_batches": run.sampler.step_batches,
    }


def save(
    run: Any,
    step: int,
    best: list | None,
    bad_run: int,
    budget: dict[str, Any],
    better: bool = False,
    stats: dict[str, float] | None = None,
) -> Path:
    """Save `step` in each run directory that a writer holds (the main process's, or one per
    node on node-local disks: t2.train.nodes), the same checkpoint in each: the parts of
    the state that differ between processes (the RNG, the clock) are the main process's.
    Every process calls it; the caller waits for the writers. `stats`: the running sums
    not logged yet (a preempted run's), so that a resumed run logs what an uninterrupted
    one would."""
    state = training_state(run, step, best, bad_run, budget)
    if stats is not None:
        state["stats"] = stats
    own = {k: state[k] for k in ("rng", "elapsed_s")}
    state.update(run.waits.from_main(own))
    acc = run.accelerator
    if run.storage.run.writes:
        save_checkpoint(
            run.run_dir,
            step,
            acc.unwrap_model(run.model),
            run.cfg,
            state,
            run.cfg.train.keep_last,
            best=better,
            world_size=acc.num_processes,
        )
    return run.run_dir.checkpoint(step)


def restore(run: Any, ckpt: Path) -> dict[str, Any]:
    """Load a checkpoint's weights and training state into `run` (the RNG comes later, once
    the loader has made its iterator); the saved state is returned."""
    load_weights(run.accelerator.unwrap_model(run.model), ckpt)
    run.forward.after_update()  # bf16 compute weights, if any, from the loaded master
    state = load_training_state(ckpt)
    try:
        run.optimizer.load_state_dict(state["optimizer"])
        run.scheduler.load_state_dict(state["scheduler"])
    except (KeyError, ValueError, TypeError, RuntimeError) as err:
        raise CheckpointError(
            f"the optimizer or scheduler state of {ckpt} does not fit this run ({err}); "
            f"resume with the config it was saved with"
        ) from None
    run.sampler.load_state_dict(state["data"])  # names the setting that changed, if any
    saved, now = state.get("step_batches"), run.sampler.step_batches
    if saved != now and run.accelerator.is_main_process:
        print(
            f"resume: {now} batches per step (processes x train.accumulate), saved with "
            f"{saved}: the data go on where they stopped; updates differ in size"
        )
    return state
