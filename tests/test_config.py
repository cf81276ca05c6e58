"""Typed config: defaults valid, every choice checked with the valid ones listed, exact
YAML round-trip, and the registries behind the component choices."""

from __future__ import annotations

import dataclasses

import pytest

from t2.config import SECTIONS, Config, DataConfig, ModelConfig, TrainConfig
from t2.errors import ConfigError
from t2.recipes import load_config, recipe_names
from t2.registry import ATTENTION, FFN, NORM, POSITIONAL

REGISTRY_FIELDS = {"positional": POSITIONAL, "norm": NORM, "ffn": FFN, "attention": ATTENTION}


def test_defaults_are_the_papers_base_model():
    cfg = Config()
    m = cfg.model
    assert (m.d_model, m.n_heads, m.d_ff, m.n_encoder_layers, m.n_decoder_layers) == (
        512,
        8,
        2048,
        6,
        6,
    )
    assert (m.positional, m.norm, m.ffn, m.norm_position, m.tie_embeddings) == (
        "sinusoidal",
        "layernorm",
        "relu",
        "post",
        "all",
    )
    assert m.d_head == 64 and m.d_hidden == 2048
    assert cfg.train.betas == (0.9, 0.98) and cfg.train.label_smoothing == 0.1


@pytest.mark.parametrize("name", recipe_names())
def test_every_recipe_round_trips_through_yaml(name):
    cfg = load_config(name)
    assert Config.from_yaml(cfg.to_yaml()) == cfg


def test_non_default_values_round_trip():
    cfg = Config(
        model=ModelConfig(d_model=64, n_heads=4, positional="rope", norm_eps=1e-6, bias=False),
        data=DataConfig(tokenizer="", max_length_ratio=2.5, src_bos=True),
        train=TrainConfig(betas=(0.8, 0.95), eps=1e-9, max_lr=3e-4, mixed_precision="no"),
    )
    text = cfg.to_yaml()
    again = Config.from_yaml(text)
    assert again == cfg and again.train.betas == (0.8, 0.95)
    assert again.to_yaml() == text
    assert Config.from_yaml("") == Config()  # an empty file is the defaults


@pytest.mark.parametrize("field", REGISTRY_FIELDS)
def test_unknown_component_lists_the_registered_ones(field):
    with pytest.raises(ConfigError) as err:
        ModelConfig(**{field: "nope"})
    message = str(err.value)
    assert "'nope'" in message and f"model.{field}" in message and "\n" not in message
    assert all(name in message for name in REGISTRY_FIELDS[field].names())
    for name in REGISTRY_FIELDS[field].names():  # and every registered one is accepted
        assert getattr(ModelConfig(**{field: name}), field) == name


@pytest.mark.parametrize(
    "section, key, valid",
    [
        ("model", "norm_position", ["post", "pre"]),
        ("model", "tie_embeddings", ["all", "decoder", "none"]),
        ("model", "init", ["default", "small", "xavier"]),
        ("model", "embedding_init", ["normal", "small", "unit"]),
        ("train", "optimizer", ["adam", "adamw"]),
        ("train", "schedule", ["cosine", "inverse_sqrt"]),
        ("train", "mixed_precision", ["auto", "bf16", "fp16", "no"]),
    ],
)
def test_bad_choice_lists_the_valid_ones(section, key, valid):
    with pytest.raises(
        ConfigError, match=f"{section}.{key} 'nope'; valid choices: {', '.join(valid)}$"
    ):
        Config.from_dict({section: {key: "nope"}})
    for value in valid:
        Config.from_dict({section: {key: value}})


def test_unknown_section_and_key_list_the_valid_ones():
    with pytest.raises(ConfigError, match="'modle'; valid keys: data, decode, model, train$"):
        Config.from_dict({"modle": {}})
    valid = ", ".join(sorted(f.name for f in dataclasses.fields(ModelConfig)))
    with pytest.raises(ConfigError, match=f"'dmodel'; valid keys: {valid}$"):
        Config.from_dict({"model": {"dmodel": 512}})
    with pytest.raises(ConfigError, match="must be a mapping"):
        Config.from_dict({"model": [1, 2]})


@pytest.mark.parametrize(
    "section, values, message",
    [
        ("model", {"d_model": "512"}, "model.d_model must be int"),
        ("model", {"d_model": 512.0}, "model.d_model must be int"),
        ("model", {"bias": 1}, "model.bias must be bool"),
        ("model", {"d_model": True}, "model.d_model must be int"),
        ("model", {"dropout": True}, "model.dropout must be float"),
        ("model", {"positional": None}, "model.positional must be str"),
        ("train", {"betas": [0.9]}, "train.betas must be a list of 2 numbers"),
        ("train", {"betas": [0.9, "x"]}, "train.betas must be float"),
        ("model", {"d_model": 100, "n_heads": 8}, "not divisible by model.n_heads"),
        ("model", {"n_heads": 0}, "model.n_heads"),
        ("model", {"d_model": -8}, "model.d_model"),
        ("model", {"vocab_size": 0}, "model.vocab_size"),
        ("model", {"dropout": 1.5}, "model.dropout"),
        ("model", {"attention_dropout": -0.1}, "model.attention_dropout"),
        (
            "model",
            {"n_kv_heads": 3},
            r"model.n_kv_heads=3 does not divide model.n_heads=8; choose 0 \(one per query "
            r"head\) or one of 1, 2, 4, 8$",
        ),
        ("model", {"n_kv_heads": -1}, "model.n_kv_heads=-1 does not divide"),
        ("model", {"n_kv_heads": 2, "tie_qk_init": True}, "W_K, which has 2 of 8 heads"),
        ("train", {"log_every": 0}, "train.log_every must be at least 1, got 0"),
        ("train", {"accumulate": 0}, "train.accumulate must be a whole number >= 1 or auto"),
        ("train", {"accumulate": "many"}, "train.accumulate must be a whole number >= 1 or auto"),
        ("train", {"global_batch": -5}, "train.global_batch must be at least 0"),
        ("data", {"max_tokens": "auto", "batch_size": 8}, "data.max_tokens=auto plans token"),
        ("data", {"max_shapes": -1}, "data.max_shapes must be at least 0"),
        ("data", {"pad_multiple": 0}, "data.pad_multiple must be at least 1"),
        ("train", {"keep_last": 0}, "train.keep_last must be at least 1"),
        ("train", {"max_steps": -5}, "train.max_steps must be at least 1"),
        ("train", {"warmup_steps": -1}, "train.warmup_steps must be at least 0"),
        ("train", {"label_smoothing": 1.0}, "train.label_smoothing must be in"),
        ("train", {"lr_find_range": [1.0, 1e-7]}, "train.lr_find_range must be"),
        ("data", {"train": "foo"}, "data.train='foo' is not a data source"),
        ("data", {"test": "files:"}, "data.test='files:' is not a data source"),
        ("data", {"max_tokens": -1}, "data.max_tokens must be a whole number >= 0 or auto"),
        ("data", {"max_tokens": 0, "batch_size": 0}, "set data.max_tokens"),
        ("decode", {"beam_size": 0}, "decode.beam_size must be at least 1"),
        ("decode", {"batch_size": 0}, "decode.batch_size must be at least 1"),
    ],
)
def test_bad_values_fail_at_start_up_with_one_line(section, values, message):
    with pytest.raises(ConfigError, match=message) as err:
        Config.from_dict({section: values})
    assert "\n" not in str(err.value)


def test_ints_are_accepted_for_floats_and_stored_as_floats():
    cfg = Config.from_dict({"model": {"dropout": 0}, "train": {"betas": [1, 1], "max_lr": 1}})
    assert cfg.model.dropout == 0.0 and isinstance(cfg.model.dropout, float)
    assert cfg.train.betas == (1.0, 1.0) and all(isinstance(b, float) for b in cfg.train.betas)
    assert isinstance(cfg.train.max_lr, float)


def test_derived_sizes():
    assert ModelConfig(d_model=64, n_heads=4).d_head == 16
    assert ModelConfig(d_ff=2048, ffn="swiglu").d_hidden == 1368  # 2/3 d_ff, multiple of 8
    assert ModelConfig(d_ff=96, ffn="geglu").d_hidden == 64
    assert ModelConfig(d_ff=96, ffn="gelu").d_hidden == 96
    assert (ModelConfig().kv_heads, ModelConfig().d_kv) == (8, 512)
    assert (ModelConfig(n_kv_heads=2).kv_heads, ModelConfig(n_kv_heads=1).d_kv) == (2, 64)


def test_sections_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Config().model.d_model = 3  # type: ignore[misc]
    assert set(SECTIONS) == {f.name for f in dataclasses.fields(Config)}


def test_the_four_registries_hold_the_shipped_components():
    assert {"none", "sinusoidal", "learned", "rope"} <= set(POSITIONAL.names())
    assert {"layernorm", "rmsnorm"} <= set(NORM.names())
    assert {"relu", "gelu", "swiglu", "geglu"} <= set(FFN.names())
    assert {"sdpa", "math", "flash_attn"} <= set(ATTENTION.names())


def test_nbest_is_checked_once_against_the_beam_size():
    from t2.config import DecodeConfig

    assert DecodeConfig(beam_size=5, nbest=5).nbest == 5
    with pytest.raises(ConfigError, match="decode.nbest=3 is more than decode.beam_size=2"):
        DecodeConfig(beam_size=2, nbest=3)
    with pytest.raises(ConfigError, match="decode.nbest=4 is more than decode.beam_size=1"):
        dataclasses.replace(DecodeConfig(beam_size=4, nbest=4), beam_size=1)
