"""Checkpoint round-trip (safetensors, tied matrices stored once) and refusals to load
weights into another architecture or vocabulary."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from t2.config import Config
from t2.errors import CheckpointError
from t2.model.transformer import Transformer
from t2.rundir import RunDir, load_model, load_weights, save_checkpoint
from t2.rundir.layout import COMPLETE, META, WEIGHTS

pytestmark = pytest.mark.usefixtures("single_thread")


def _save(model: Transformer, run_dir: Path, step: int = 1) -> Path:
    cfg = Config(model=model.cfg)
    return save_checkpoint(RunDir(run_dir), step, model, cfg, {"step": step}, keep_last=5)


@pytest.mark.parametrize("tie", ["all", "decoder", "none"])
def test_round_trip(tmp_path, tiny_model_config, tie):
    torch.manual_seed(0)
    model = Transformer(tiny_model_config(tie_embeddings=tie, positional="learned"))
    with torch.no_grad():  # move away from the initialisation, so loading must do something
        for p in model.parameters():
            p.add_(torch.randn_like(p))
    ckpt = _save(model, tmp_path)
    stored = load_file(str(ckpt / WEIGHTS))
    assert ("tgt_embed.weight" in stored) == (tie != "all")  # a tied matrix is stored once
    loaded, cfg = load_model(tmp_path)
    assert cfg.model == model.cfg and not loaded.training
    assert (loaded.src_embed.weight is loaded.tgt_embed.weight) == (tie == "all")
    for (name, p), q in zip(model.state_dict().items(), loaded.state_dict().values(), strict=True):
        assert torch.equal(p, q), name
    src, tgt = torch.randint(1, 50, (2, 5)), torch.randint(1, 50, (2, 4))
    torch.testing.assert_close(loaded(src, tgt), model.eval()(src, tgt))


@pytest.mark.parametrize(
    "change",
    [
        {"vocab_size": 60},
        {"d_model": 32},
        {"d_ff": 64},
        {"n_encoder_layers": 2},
        {"n_decoder_layers": 0},
        {"ffn": "swiglu"},
        {"positional": "learned"},
        {"bias": False},
        {"tie_embeddings": "none"},
    ],
    ids=lambda change: "-".join(f"{k}={v}" for k, v in change.items()),
)
def test_loading_into_another_architecture_raises(tmp_path, tiny_model_config, change):
    ckpt = _save(Transformer(tiny_model_config()), tmp_path)
    with pytest.raises(CheckpointError):
        load_weights(Transformer(tiny_model_config(**change)), ckpt)


def test_loading_untied_embeddings_into_a_tied_model_raises(tmp_path, tiny_model_config):
    ckpt = _save(Transformer(tiny_model_config(tie_embeddings="decoder")), tmp_path)
    with pytest.raises(CheckpointError):
        load_weights(Transformer(tiny_model_config(tie_embeddings="all")), ckpt)


def test_incomplete_or_corrupt_checkpoints_are_refused(tmp_path, tiny_model_config):
    ckpt = _save(Transformer(tiny_model_config()), tmp_path)
    (ckpt / COMPLETE).unlink()
    with pytest.raises(CheckpointError, match="no complete checkpoint"):
        load_model(tmp_path)
    with pytest.raises(CheckpointError, match="incomplete"):
        load_model(ckpt)
    (ckpt / COMPLETE).touch()
    (ckpt / WEIGHTS).write_bytes(b"not safetensors")
    with pytest.raises(CheckpointError, match="does not match the checksum"):
        load_model(ckpt)
    (ckpt / META).unlink()  # a format-1 checkpoint has no checksums: the reader must say it
    with pytest.raises(CheckpointError, match="cannot read"):
        load_model(ckpt)
