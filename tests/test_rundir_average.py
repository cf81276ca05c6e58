"""Checkpoints for evaluation: averaging, mismatched architecture or vocabulary, and weights
that are never unpickled."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from toy_task import tiny_config, write_run

from t2.config import Config
from t2.errors import CheckpointError
from t2.formats.run import load_run
from t2.model.transformer import Transformer
from t2.rundir import RunDir, average_checkpoints, average_weights, last_checkpoints

pytestmark = pytest.mark.usefixtures("single_thread")


def test_mismatched_checkpoints_fail_clearly(toy, tmp_path):
    _, model, tokenizer = toy
    cfg = tiny_config(len(tokenizer))
    run = write_run(tmp_path / "arch", model, cfg, tokenizer)
    ckpt = run / "checkpoints" / "step-0000100"
    wider = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, d_ff=96))
    (ckpt / "config.yaml").write_text(wider.to_yaml())
    with pytest.raises(CheckpointError, match="does not fit this"):
        load_run(run)
    other_vocab = tiny_config(len(tokenizer) + 8)
    torch.manual_seed(0)
    write_run(tmp_path / "vocab", Transformer(other_vocab.model), other_vocab, tokenizer)
    with pytest.raises(CheckpointError, match="tokens but checkpoint .* vocabulary of"):
        load_run(tmp_path / "vocab")


def test_average_of_the_last_checkpoints(toy, tmp_path):
    _, _, tokenizer = toy
    cfg = tiny_config(len(tokenizer))
    models = []
    for seed in range(3):
        torch.manual_seed(seed)
        models.append(Transformer(cfg.model))
        write_run(tmp_path / "run", models[-1], cfg, tokenizer, steps=(seed + 1,))
    found = last_checkpoints(tmp_path / "run", 2)
    assert [p.name for p in found] == ["step-0000002", "step-0000003"]
    averaged = average_checkpoints(tmp_path / "run", 2)
    weights = load_file(str(averaged / "model.safetensors"))
    expected = (models[1].src_embed.weight + models[2].src_embed.weight) / 2
    torch.testing.assert_close(weights["src_embed.weight"], expected.detach())
    assert average_weights(found).keys() == weights.keys()
    bundle = load_run(tmp_path / "run", average_last=2)
    model, ckpt = bundle.model, bundle.path
    assert ckpt == averaged and last_checkpoints(tmp_path / "run", 3)[-1].name == "step-0000003"
    torch.testing.assert_close(model.decoder[0].ffn.state_dict(), _mean_ffn(models[1:]))
    with pytest.raises(CheckpointError, match="needs 4 complete checkpoints"):
        average_checkpoints(tmp_path / "run", 4)
    assert isinstance(Config.from_yaml((averaged / "config.yaml").read_text()), Config)


def _mean_ffn(models: list[Transformer]) -> dict[str, torch.Tensor]:
    states = [m.decoder[0].ffn.state_dict() for m in models]
    return {k: sum(s[k] for s in states) / len(states) for k in states[0]}


class _Boom:
    """Unpickling this runs code: a safe loader must never do it."""

    def __reduce__(self):
        return (Path.touch, (Path(os.environ["T2_PICKLE_MARK"]),))


def test_pickled_weights_are_never_unpickled(toy, tmp_path, monkeypatch):
    _, model, tokenizer = toy
    cfg = tiny_config(len(tokenizer))
    run = write_run(tmp_path / "run", model, cfg, tokenizer, steps=(1, 2))
    mark = tmp_path / "pickle-ran"
    monkeypatch.setenv("T2_PICKLE_MARK", str(mark))
    ckpt = RunDir(run).checkpoint(2)
    torch.save({"src_embed.weight": _Boom()}, ckpt / "model.safetensors")
    (ckpt / "meta.json").unlink()  # no checksum (format 1): the safetensors reader must refuse
    with pytest.raises(CheckpointError, match="cannot read"):
        load_run(run)
    with pytest.raises(CheckpointError, match="cannot read"):
        average_checkpoints(run, 2)
    assert not mark.exists()
