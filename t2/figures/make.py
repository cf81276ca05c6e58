"""All figures of one run: `t2 figures RUN_DIR [--sentence TEXT]` (docs/figures.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tokenizers import decoders

from t2.config import Config
from t2.data.encode import encode_source
from t2.data.pipeline import load_pairs
from t2.errors import CheckpointError, DataError
from t2.experiments.reports.plots import plot_curves
from t2.figures.capture import capture_attention
from t2.figures.draw import draw_attention, draw_lr_find, draw_positional
from t2.formats.run import load_run
from t2.model.transformer import Transformer
from t2.registry import POSITIONAL
from t2.rundir import RunDir, resolve
from t2.serve.engine import TorchEngine, pad_batch
from t2.specials import BOS

FIGURES = "figures"  # the default output folder inside the run directory
LR_FIND = "lr_find.json"  # what `t2 train --lr-find` leaves in the run directory

# file name, title, (row axis, column axis) of each attention figure
ATTENTION_FIGURES = {
    "encoder_self": (
        "attention_encoder_self.png",
        "Encoder self-attention",
        ("source token", "source token"),
    ),
    "decoder_self": (
        "attention_decoder_self.png",
        "Decoder self-attention (causal)",
        ("decoder input token", "decoder input token"),
    ),
    "cross": (
        "attention_cross.png",
        "Cross-attention (encoder-decoder)",
        ("decoder input token", "source token"),
    ),
}


@dataclass(frozen=True)
class FigureOptions:
    """What `t2 figures` asks for; sentence None: the run's first validation source."""

    run_dir: str
    sentence: str | None = None
    out: str | None = None
    checkpoint: str = "best"  # best (else latest), latest, or a checkpoint folder
    positions: int = 100  # rows of the positional-encoding figure (report 000 drew 100)
    device: str = "cpu"
    trust_plugins: bool = False  # a downloaded run's plugins (t2.rundir.plugins)


def write_figures(opts: FigureOptions) -> list[Path]:
    """Every figure of a run into opts.out (default RUN/figures/); returns the paths."""
    run = RunDir(opts.run_dir)
    if not run.path.is_dir():
        raise CheckpointError(f"run directory {run.path} not found; pass a folder of t2 train")
    if opts.sentence is not None and not opts.sentence.strip():
        raise DataError(
            "--sentence is empty; pass some text, or leave it out to use the "
            "first sentence of the run's validation split"
        )
    if opts.positions < 1:
        raise DataError(f"--positions must be at least 1, got {opts.positions}")
    ckpt = choose_checkpoint(run, opts.checkpoint)
    bundle = load_run(ckpt, 0, opts.device, opts.trust_plugins)
    model, cfg, tokenizer, ckpt = bundle.t2_model(), bundle.config, bundle.tokenizer, bundle.path
    sentence = opts.sentence if opts.sentence is not None else first_valid_source(cfg)
    out = Path(opts.out) if opts.out else run.file(FIGURES)
    out.mkdir(parents=True, exist_ok=True)
    m = cfg.model
    name = f"{run.path.resolve().name}, {ckpt.name}"
    summary = POSITIONAL.facts(m.positional).summary
    drawn = out / "positional_encoding.png"
    draw_positional(m.d_model, opts.positions, m.rope_base, m.positional, summary, drawn)
    paths = [out / "positional_encoding.png"]
    paths += attention_figures(model, tokenizer, cfg, sentence, out, name)
    paths += lr_find_figure(run, out)
    paths += training_curves(run, out)
    return paths


def choose_checkpoint(run: RunDir, which: str) -> Path:
    """`best` (the run's best, else its latest), `latest`, or a checkpoint folder's path."""
    if which == "latest":
        found = run.latest()
        if found is None:
            raise CheckpointError(f"no complete checkpoint under {run.path}; train it first")
        return found
    return resolve(run.path if which == "best" else which)


def first_valid_source(cfg: Config) -> str:
    """The first source sentence of the run's validation split (cleaned and cached)."""
    pairs = load_pairs(cfg.data, "valid", cfg.train.seed)
    return str(pairs[0]["src"])


def token_labels(tokenizer: Any, ids: list[int]) -> list[str]:
    """Readable subword labels: byte-level pieces decoded, a word's leading space as ▁."""
    byte_level = decoders.ByteLevel()
    labels = [byte_level.decode([t]) for t in tokenizer.convert_ids_to_tokens(ids)]
    return ["▁" + t[1:] if t.startswith(" ") else t for t in labels]


def attention_figures(
    model: Transformer, tokenizer: Any, cfg: Config, sentence: str, out: Path, name: str
) -> list[Path]:
    """Translate the sentence greedily, then draw what every head attends to in one
    teacher-forced pass over BOS + that translation."""
    device = next(model.parameters()).device
    src_ids = encode_source(tokenizer, [sentence], cfg.data.src_bos)[0]
    greedy = replace(cfg.decode, search="greedy", nbest=1)
    engine = TorchEngine(model, tokenizer, cfg.data.src_bos, device)
    output = engine.decode_ids([src_ids], greedy, None)[0][0].tokens
    tgt_ids = [BOS, *output]
    maps = capture_attention(model, pad_batch([src_ids], device), pad_batch([tgt_ids], device))
    src_labels, tgt_labels = token_labels(tokenizer, src_ids), token_labels(tokenizer, tgt_ids)
    labels = {
        "encoder_self": (src_labels, src_labels),
        "decoder_self": (tgt_labels, tgt_labels),
        "cross": (tgt_labels, src_labels),
    }
    translation = tokenizer.decode(output, skip_special_tokens=True)
    paths = []
    for kind, weights in maps.kinds().items():
        file, title, axes = ATTENTION_FIGURES[kind]
        text = f"{title}: {name}\nsource: {sentence}\ngreedy output: {translation}"
        rows, cols = labels[kind]
        paths.append(draw_attention(weights[0].numpy(), rows, cols, axes, text, out / file))
    return paths


def lr_find_figure(run: RunDir, out: Path) -> list[Path]:
    """The learning-rate range test redrawn from lr_find.json, if the run has one."""
    path = run.file(LR_FIND)
    if not path.is_file():
        return []
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        lrs, losses, suggestion = record["lrs"], record["losses"], record["suggestion"]
    except (ValueError, KeyError, TypeError):
        raise DataError(
            f"{path} is not what t2 train --lr-find writes; rerun it or remove the file"
        ) from None
    title = f"Learning-rate range test: {run.path.resolve().name}"
    return [draw_lr_find(lrs, losses, suggestion, title, out / "lr_find.png")]


def training_curves(run: RunDir, out: Path) -> list[Path]:
    """Training loss, validation loss and BLEU against step and time (t2.experiments)."""
    if not run.metrics.is_file():
        return []

    return plot_curves({run.path.resolve().name: [run.path]}, out)
