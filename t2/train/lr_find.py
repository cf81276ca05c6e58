"""Learning-rate range test (Smith 2015, arXiv:1506.01186; report 000, figure 2.3).

The learning rate grows exponentially from the first to the last value of
`train.lr_find_range` over `train.lr_find_steps` steps; the suggestion is the rate at the
steepest descent of the smoothed loss before it diverges.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from t2.config import Config
from t2.data.loader import Batches
from t2.errors import T2Error
from t2.rundir import write_json
from t2.train.setup import build_run
from t2.train.step import StepStats, train_step


def smooth(values: list[float], beta: float = 0.9) -> list[float]:
    """Bias-corrected exponential moving average (as fastai's and Lightning's finders)."""
    out, avg = [], 0.0
    for i, v in enumerate(values, 1):
        avg = beta * avg + (1 - beta) * v
        out.append(avg / (1 - beta**i))
    return out


def suggest(lrs: list[float], losses: list[float]) -> tuple[float, int]:
    """The rate where the smoothed loss falls fastest, before it exceeds 4x its minimum."""
    smoothed = smooth(losses)
    best = min((v for v in smoothed if math.isfinite(v)), default=math.inf)
    end = next(
        (i for i, v in enumerate(smoothed) if not math.isfinite(v) or v > 4 * best),
        len(smoothed),
    )
    if end < 3:
        raise T2Error("the loss diverged at once; lower the start of train.lr_find_range")
    slopes = [
        (smoothed[i + 1] - smoothed[i - 1]) / (math.log(lrs[i + 1]) - math.log(lrs[i - 1]))
        for i in range(1, end - 1)
    ]
    i = 1 + min(range(len(slopes)), key=slopes.__getitem__)
    return lrs[i], i


def step_loss(stats: StepStats) -> torch.Tensor:
    """The step's mean loss; NaN for a step skipped as non-finite (its sums hold zeros, and
    a zero loss would look like the steepest descent instead of the divergence it is)."""
    return torch.where(stats.skipped.bool(), math.nan, stats.loss / stats.tokens.clamp(min=1))


def lr_find(cfg: Config, run_dir: Path) -> tuple[float, Path]:
    run = build_run(cfg, "lr_find", Path(run_dir), resume=True, wandb="disabled")
    acc, cfg = run.accelerator, run.cfg
    lo, hi = cfg.train.lr_find_range
    n = cfg.train.lr_find_steps
    lrs = [lo * (hi / lo) ** (i / max(n - 1, 1)) for i in range(n)]
    batches, losses = Batches(run.loader), []
    run.model.train()
    for lr in lrs:
        for group in run.optimizer.param_groups:
            group["lr"] = lr
        micro = [next(batches) for _ in range(cfg.train.accumulate)]
        stats = StepStats.zeros(acc.device)
        train_step(
            acc,
            run.forward,
            run.optimizer,
            micro,
            run.tokenizer.pad_token_id,
            cfg.train.label_smoothing,
            cfg.train.clip_norm,
            stats,
        )
        losses.append(step_loss(stats))  # stays on the device
    batches.close()
    values = torch.stack(losses).tolist()  # one synchronisation for the whole sweep
    suggestion, index = suggest(lrs, values)
    plot = run.run_dir.file("lr_find.png")
    if acc.is_main_process:
        _plot(lrs, values, index, plot)
        record = {"lrs": lrs, "losses": values, "suggestion": suggestion}
        write_json(run.run_dir.file("lr_find.json"), record)
    return suggestion, plot


def _plot(lrs: list[float], losses: list[float], index: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(lrs, losses, label="loss", alpha=0.4)
    ax.plot(lrs, smooth(losses), label="smoothed loss")
    ax.plot(
        lrs[index], smooth(losses)[index], "o", color="red", label=f"suggested {lrs[index]:.2g}"
    )
    ax.set_xscale("log")
    ax.set_xlabel("learning rate")
    ax.set_ylabel("training loss")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
