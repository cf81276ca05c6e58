"""Drawing with matplotlib's object API (no pyplot state; PNGs through the Agg canvas),
each figure written to a temporary file and renamed, so no half-written PNG is left."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from t2.atomic import atomic_file
from t2.model.positional.sinusoidal import sinusoid_table
from t2.train.lr_find import smooth

DPI = 110
CELL_INCHES = 0.16  # one token's row or column in an attention panel: 7-point labels fit
PANEL_MIN_INCHES = 1.6
LABEL_INCHES = 0.075  # width of one character of a 7-point label


def save_png(fig: Figure, path: Path) -> Path:
    """Write `fig` as PNG to path atomically (t2.atomic)."""
    with atomic_file(path, binary=True) as f:
        fig.savefig(f, format="png", dpi=DPI)
    return path


def draw_positional(
    d_model: int, n_positions: int, base: float, scheme: str, summary: str, path: Path
) -> np.ndarray:
    """Report 000's figure 1.1: the sinusoidal table PE (position x dimension) for this
    d_model, labelled with the run's own scheme and its `summary` (how it gives positions:
    its facts'); returns the values drawn."""
    table = sinusoid_table(n_positions, d_model, base).numpy()
    width = min(22.0, max(8.0, 2 * d_model / DPI + 2.2))  # two pixels a dimension: no moire
    fig = Figure(figsize=(width, 5), layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow(table, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    ax.set_xlabel("dimension i")
    ax.set_ylabel("position t")
    ax.set_title(
        f"Sinusoidal positional encoding, d_model = {d_model}, first {n_positions} positions\n"
        f"PE[t, 2i] = sin(t / {base:g}^(2i/d)), PE[t, 2i+1] = cos(t / {base:g}^(2i/d))\n"
        f"this run's positional scheme: {scheme}, {summary}",
        fontsize=9,
    )
    fig.colorbar(image, ax=ax, label="PE[t, i]")
    save_png(fig, path)
    return np.asarray(image.get_array())


def draw_attention(
    weights: np.ndarray,  # (L, H, queries, keys)
    query_labels: Sequence[str],
    key_labels: Sequence[str],
    axes_names: tuple[str, str],  # what a row and a column stand for
    title: str,
    path: Path,
) -> Path:
    """A grid of layers (rows) x heads (columns) of attention maps on one colour scale,
    0 to 1; token labels on the outer panels (every panel shares them)."""
    n_layers, n_heads, n_q, n_k = weights.shape
    cell = max(CELL_INCHES, PANEL_MIN_INCHES / max(n_q, n_k))  # square cells, small panels grow
    label = LABEL_INCHES * max(len(t) for t in [*query_labels, *key_labels])
    width = n_heads * (cell * n_k + 0.1) + label + 2.8  # + layer names and colour bar
    height = n_layers * (cell * n_q + 0.1) + label + 1.5  # + head names and the title
    fig = Figure(figsize=(width, height), layout="constrained")
    grid = fig.subplots(n_layers, n_heads, squeeze=False, sharex=True, sharey=True)
    for (layer, head), ax in np.ndenumerate(grid):
        image = ax.imshow(
            weights[layer, head],
            cmap="viridis",
            vmin=0.0,
            vmax=1.0,
            interpolation="nearest",
            aspect="equal",
        )
        ax.set_xticks(range(n_k), [plain(t) for t in key_labels], rotation=90, fontsize=7)
        ax.set_yticks(range(n_q), [plain(t) for t in query_labels], fontsize=7)
        ax.tick_params(length=0, labelbottom=layer == n_layers - 1, labelleft=head == 0)
        if layer == 0:
            ax.set_title(f"head {head + 1}", fontsize=9)
        if head == 0:
            ax.set_ylabel(f"layer {layer + 1}", fontsize=9)
    fig.supylabel(f"{axes_names[0]} (query)", fontsize=9)
    fig.supxlabel(f"{axes_names[1]} (key)", fontsize=9)
    fig.suptitle(plain(_wrap(title, width)), fontsize=10)
    fig.colorbar(image, ax=grid, shrink=min(1.0, 6.0 / height), label="attention weight")
    return save_png(fig, path)


def plain(text: str) -> str:
    """Text as written: matplotlib would read a pair of $ as mathematics."""
    return text.replace("$", r"\$")


def _wrap(text: str, width_inches: float) -> str:
    """Wrap each line of a title to the figure's width (about 13 characters an inch)."""
    chars = max(40, int(width_inches * 13))
    return "\n".join(textwrap.fill(line, chars) for line in text.splitlines())


def draw_lr_find(
    lrs: Sequence[float], losses: Sequence[float], suggestion: float, title: str, path: Path
) -> Path:
    """The learning-rate range test (report 000, figure 2.3): loss against learning rate,
    raw and smoothed, with the suggested rate marked."""
    curve = smooth(list(losses))
    index = min(range(len(lrs)), key=lambda i: abs(math.log(lrs[i] / suggestion)))
    fig = Figure(figsize=(6.5, 4.2), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(lrs, losses, label="loss", alpha=0.4)
    ax.plot(lrs, curve, label="smoothed loss")
    ax.plot(lrs[index], curve[index], "o", color="red", label=f"suggested {suggestion:.3g}")
    finite = [v for v in [*losses, *curve] if math.isfinite(v)]
    if finite:  # a diverging tail would squash the part that matters
        low, cap = min(finite), 4 * min(v for v in curve if math.isfinite(v))  # lr_find's rule
        high = max(v for v in finite if v <= cap)
        pad = 0.05 * (high - low) or 0.05 * abs(low) or 0.1  # a flat curve still gets a range
        ax.set_ylim(low - pad, high + pad)
    ax.set_xscale("log")
    ax.set_xlabel("learning rate")
    ax.set_ylabel("training loss")
    ax.set_title(title, fontsize=10)
    ax.legend()
    return save_png(fig, path)
