"""Curves of several runs overlaid: training loss, validation loss and validation BLEU
against step, target tokens and wall time, one colour per group of runs. A group of
several runs (seeds) is drawn as its mean with a band of one standard deviation: records
are matched by step (seeds of one setting log and validate at the same steps), at each
step that every run reached, plus the runs' last records averaged (a time or token budget
ends runs at different steps; the last record is the one a sweep report compares). On the
token and time axes a point sits at the runs' mean x. PNGs through matplotlib's Agg."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from t2.experiments.sweeps.runs import read_records
from t2.rundir import RunDir

# x axes: (file suffix, record key, axis label, scale)
AXES = [
    ("step", "step", "step", 1.0),
    ("tokens", "train_tokens", "target tokens trained", 1.0),
    ("time", "elapsed_s", "training wall time (minutes)", 1 / 60),
]
PANELS = [
    ("loss", "training loss (label-smoothed)"),
    ("valid_loss", "validation loss (cross-entropy)"),
    ("valid_bleu", "validation BLEU (greedy)"),
]


def series(records: list[dict[str, Any]], x_key: str, y_key: str, scale: float) -> np.ndarray:
    """(n, 3) rows of step, x and y of the records that carry both keys, y finite."""
    rows = [
        (r["step"], r[x_key] * scale, r[y_key])
        for r in records
        if all(isinstance(r.get(k), (int, float)) for k in ("step", x_key, y_key))
        and math.isfinite(r[y_key])
    ]
    return np.array(rows, dtype=float).reshape(-1, 3)


def mean_band(curves: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x, mean and sample standard deviation of y over runs, at every step that all the
    runs recorded and at their last records."""
    common = sorted(set.intersection(*(set(c[:, 0]) for c in curves)))
    groups = [np.stack([c[c[:, 0] == s][-1] for c in curves]) for s in common]
    if any(c[-1, 0] not in common for c in curves):
        groups.append(np.stack([c[-1] for c in curves]))
    points = np.stack([[g[:, 1].mean(), g[:, 2].mean(), g[:, 2].std(ddof=1)] for g in groups])
    points = points[np.argsort(points[:, 0], kind="stable")]
    return points[:, 0], points[:, 1], points[:, 2]


def _draw(ax: Any, curves: list[np.ndarray], colour: Any, marker: str) -> None:
    if len(curves) == 1:
        ax.plot(
            curves[0][:, 1],
            curves[0][:, 2],
            color=colour,
            marker=marker,
            markersize=3,
            linewidth=1.2,
        )
        return
    x, mean, sd = mean_band(curves)
    ax.plot(x, mean, color=colour, marker=marker, markersize=3, linewidth=1.5)
    ax.fill_between(x, mean - sd, mean + sd, color=colour, alpha=0.2, linewidth=0)


def _figure(records: dict[str, list[list[dict]]], axis: tuple, out: Path) -> Path | None:
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    suffix, x_key, x_label, scale = axis
    drawn = False
    fig, axes = plt.subplots(1, len(PANELS), figsize=(5.2 * len(PANELS), 4.2))
    colours = plt.get_cmap("tab10" if len(records) <= 10 else "tab20").colors
    handles = []
    for i, (label, runs) in enumerate(records.items()):
        colour, here = colours[i % len(colours)], False
        for ax, (y_key, _) in zip(axes, PANELS, strict=True):
            curves = [c for c in (series(r, x_key, y_key, scale) for r in runs) if len(c)]
            if curves:
                _draw(ax, curves, colour, "" if y_key == "loss" else "o")
                here = True
        drawn |= here
        shown = f"{label} (mean ± sd of {len(runs)} runs)" if len(runs) > 1 else label
        shown += "" if here else " (not recorded on this axis)"
        handles.append(plt.Line2D([], [], color=colour, linewidth=2, label=shown))
    if drawn:
        for ax, (_, y_label) in zip(axes, PANELS, strict=True):
            ax.set_xlabel(x_label)
            ax.set_ylabel(y_label)
            ax.grid(alpha=0.3)
            if x_key == "step":
                ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 3), frameon=False)
        fig.tight_layout(rect=(0, 0.06 * math.ceil(len(handles) / 3), 1, 1))
        path = out / f"curves_by_{suffix}.png"
        tmp = path.with_name(f".{path.name}.tmp")
        fig.savefig(tmp, dpi=110, format="png")
        tmp.replace(path)
    plt.close(fig)
    return path if drawn else None


def plot_curves(groups: dict[str, list[Path]], out_dir: Path) -> list[Path]:
    """One PNG per x axis (step, target tokens, wall time) with three panels (training
    loss, validation loss, validation BLEU); an axis no run records is left out."""
    import matplotlib

    matplotlib.use("Agg")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    records = {
        label: [read_records(RunDir(p).metrics) for p in paths] for label, paths in groups.items()
    }
    return [p for axis in AXES if (p := _figure(records, axis, out_dir)) is not None]
