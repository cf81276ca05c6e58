"""`t2 figures`: captured attention (shapes, softmax rows, causality, padding, unchanged
output), the positional-encoding table against its closed form, every PNG of a trained
run, and the one-line errors."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from matplotlib.image import imread
from test_train_runs import TINY as RUN_TINY
from test_train_runs import train_here
from toy_task import tiny_config, write_run

from t2.cli import main
from t2.figures import capture_attention
from t2.figures.draw import draw_positional
from t2.figures.make import choose_checkpoint, token_labels
from t2.model.attention import record_attention
from t2.model.kernels.math import math_attention
from t2.model.kernels.sdpa import sdpa_attention
from t2.model.transformer import Transformer
from t2.rundir import RunDir

pytestmark = pytest.mark.usefixtures("single_thread")

PNG_HEADER = b"\x89PNG\r\n\x1a\n"
ATTENTION_PNGS = ["attention_cross.png", "attention_decoder_self.png", "attention_encoder_self.png"]


def tiny_model(tiny_model_config, **overrides) -> Transformer:
    torch.manual_seed(0)
    cfg = tiny_model_config(n_encoder_layers=2, n_decoder_layers=3, dropout=0.0, **overrides)
    return Transformer(cfg).eval()


def padded_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Two sources, the second with two padding positions; targets BOS + tokens."""
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
    tgt_in = torch.tensor([[1, 11, 12, 13], [1, 14, 15, 16]])
    return src, tgt_in


def assert_png(path: Path) -> None:
    """A valid PNG of real content: the header, a size, and pixels that are not all equal."""
    assert path.read_bytes()[:8] == PNG_HEADER, path
    assert path.stat().st_size > 10_000, path
    pixels = imread(path)
    assert pixels.ndim == 3 and min(pixels.shape[:2]) > 200 and pixels.std() > 0.05, path


def test_captured_weights_are_softmax_rows_causal_and_blind_to_padding(tiny_model_config):
    model = tiny_model(tiny_model_config)
    src, tgt_in = padded_batch()
    maps = capture_attention(model, src, tgt_in)
    (B, S), T, H = src.shape, tgt_in.shape[1], model.cfg.n_heads  # noqa: N806
    assert maps.encoder_self.shape == (B, 2, H, S, S)
    assert maps.decoder_self.shape == (B, 3, H, T, T)
    assert maps.cross.shape == (B, 3, H, T, S)
    for weights in maps.kinds().values():
        assert (weights >= 0).all()
        torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))
    above = torch.ones(T, T, dtype=torch.bool).triu(1)  # a query never sees a later token
    assert maps.decoder_self[..., above].abs().max() == 0
    assert maps.decoder_self[..., ~above].min() > 0
    pad = src.eq(0)  # second sentence: keys 3 and 4 are padding
    assert maps.cross[1, ..., pad[1]].abs().max() == 0
    assert maps.encoder_self[1, ..., pad[1]].abs().max() == 0
    assert maps.cross[1, ..., ~pad[1]].min() > 0
    assert maps.cross[0].min() > 0  # no padding: every source token gets some weight


@pytest.mark.parametrize("kernel", ["sdpa", "math"])
def test_capturing_gives_the_same_output_and_puts_the_kernels_back(tiny_model_config, kernel):
    model = tiny_model(tiny_model_config, attention=kernel)
    src, tgt_in = padded_batch()
    with torch.no_grad():
        plain = model(src, tgt_in)
        with record_attention(model) as records:
            recorded = model(src, tgt_in)
        again = model(src, tgt_in)
    if kernel == "math":  # the same formula, operation for operation
        assert torch.equal(plain, recorded)
    torch.testing.assert_close(recorded, plain, rtol=1e-5, atol=1e-5)
    assert torch.equal(again, plain)
    assert sorted(records) == sorted(
        [f"encoder.{i}.self_attn" for i in range(2)]
        + [f"decoder.{i}.{a}" for i in range(3) for a in ("self_attn", "cross_attn")]
    )
    assert all(len(calls) == 1 for calls in records.values())
    expected = {"sdpa": sdpa_attention, "math": math_attention}[kernel]
    layers = [model.encoder[0].self_attn, model.decoder[2].cross_attn]
    assert all(layer.kernel is expected for layer in layers)
    with pytest.raises(RuntimeError), record_attention(model):
        raise RuntimeError("a failure inside the block")
    assert all(layer.kernel is expected for layer in layers)


def test_positional_figure_draws_the_closed_form_the_model_adds(tmp_path, tiny_model_config):
    d_model, n = 16, 60
    path = tmp_path / "pe.png"
    drawn = draw_positional(d_model, n, 10000.0, "sinusoidal", "its summary", path)
    closed = np.zeros((n, d_model))
    for t in range(n):
        for i in range(d_model // 2):
            closed[t, 2 * i] = math.sin(t / 10000 ** (2 * i / d_model))
            closed[t, 2 * i + 1] = math.cos(t / 10000 ** (2 * i / d_model))
    np.testing.assert_allclose(drawn, closed, atol=1e-6)
    model = tiny_model(tiny_model_config, d_model=d_model)
    np.testing.assert_allclose(drawn, model.positional.table[:n].numpy(), atol=0)
    assert_png(path)


def test_token_labels_read_as_text(toy):
    _, _, tokenizer = toy
    ids = tokenizer.encode("zwei katze", add_special_tokens=False)
    labels = token_labels(tokenizer, [1, *ids, 2])
    assert labels[0] == "<s>" and labels[-1] == "</s>"
    assert "".join(labels[1:-1]).replace("▁", " ") == " zwei katze"
    assert labels[1].startswith("▁") and not any("Ġ" in t for t in labels)


def test_checkpoint_choice_best_latest_or_a_path(tmp_path):
    cfg = tiny_config(40, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1)
    run = write_run(tmp_path / "run", Transformer(cfg.model), cfg, _NoTokenizer(), (1, 2))
    rundir = RunDir(run)
    assert choose_checkpoint(rundir, "best") == rundir.checkpoint(2)  # no best: the latest
    rundir.mark_best(rundir.checkpoint(1))
    assert choose_checkpoint(rundir, "best") == rundir.checkpoint(1)
    assert choose_checkpoint(rundir, "latest") == rundir.checkpoint(2)
    assert choose_checkpoint(rundir, str(rundir.checkpoint(1))) == rundir.checkpoint(1)


class _NoTokenizer:
    def save_pretrained(self, folder: str) -> None:
        Path(folder).mkdir(parents=True)


def t2_figures(*args: str, capsys) -> tuple[int, str, str]:
    """`t2 figures ...` in this process: exit status, standard output and error."""
    with pytest.raises(SystemExit) as done:
        main(["figures", *args, "--device", "cpu"])
    captured = capsys.readouterr()
    return done.value.code, captured.out, captured.err


def test_a_trained_toy_run_gives_every_attention_figure(toy, tmp_path, capsys):
    run, _, _ = toy  # no metrics.jsonl and no lr_find.json: those figures are left out
    out = tmp_path / "figs"
    sentence = "eins zwei haus katze sieben hund baum acht"
    code, stdout, err = t2_figures(
        str(run), "--sentence", sentence, "--out", str(out), "--positions", "50", capsys=capsys
    )
    assert code == 0, err
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted([*ATTENTION_PNGS, "positional_encoding.png"])  # no temporary files
    assert sorted(Path(line).name for line in stdout.splitlines() if line.endswith(".png")) == names
    for name in names:
        assert_png(out / name)
    assert not (run / "figures").exists()


def test_errors_are_one_line(toy, tmp_path, capsys):
    run, _, _ = toy
    empty = tmp_path / "empty"
    empty.mkdir()
    (tmp_path / "file").write_text("x")
    cases = {
        "no complete checkpoint": [str(empty), "--sentence", "eins"],
        "not found": [str(tmp_path / "missing"), "--sentence", "eins"],
        "--sentence is empty": [str(run), "--sentence", "  "],
        "is a file, not a folder": [
            str(run),
            "--sentence",
            "eins",
            "--out",
            str(tmp_path / "file" / "figs"),
        ],
        "no complete checkpoint under": [str(run), "--checkpoint", str(empty)],
    }
    for words, args in cases.items():
        code, _, err = t2_figures(*args, capsys=capsys)
        assert code == 2 and words in err and err.count("\n") == 1, (args, err)
    assert not (tmp_path / "file").is_dir() and not (empty / "figures").exists()


# the training tests' tiny run, with two layers a stack (attention maps to draw per layer)
# and a learning-rate finder of 20 steps
TINY = [
    *(kv for kv in RUN_TINY if not kv.startswith(("model.n_encoder_layers", "model.n_decoder"))),
    "model.n_encoder_layers=2",
    "model.n_decoder_layers=2",
    "train.lr_find_steps=20",
]


def train(out: Path, *extra: str) -> None:
    """In this process (test_train_runs.train_here): the run's figures are the subject."""
    train_here(out, *(arg for kv in TINY for arg in ("--set", kv)), *extra)


@pytest.mark.slow
def test_a_trained_run_gives_every_png_including_lr_finder_and_curves(tmp_path, capsys):
    run = tmp_path / "run"
    train(run)
    train(run, "--lr-find")
    code, stdout, err = t2_figures(str(run), capsys=capsys)  # the first validation sentence
    assert code == 0, err
    written = [Path(line) for line in stdout.splitlines() if line.endswith(".png")]
    names = {p.name for p in written}
    assert {*ATTENTION_PNGS, "positional_encoding.png", "lr_find.png"} < names  # + curves
    assert all(p.parent == run / "figures" for p in written)
    assert sorted(p.name for p in (run / "figures").iterdir()) == sorted(names)
    for path in written:
        assert_png(path)
