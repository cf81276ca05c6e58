"""Recipes: every shipped recipe resolves, parents merge, overrides parse, mistakes fail
with one line listing the valid choices; `train.py --dry-run` counts the paper's 63M."""

from __future__ import annotations

import dataclasses
import os
import re
import runpy
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import t2.recipes
from t2.config import Config
from t2.errors import ConfigError
from t2.recipes import apply_overrides, load_config, load_raw, recipe_names
from t2.train.plan import planned

ROOT = Path(__file__).resolve().parent.parent
DRY_RUNS = ("base", "v2_rope_rmsnorm")


@pytest.fixture(scope="module")
def dry_runs():
    """`train.py --recipe NAME --dry-run` for base, v2 and an unknown recipe, run side by
    side in fresh interpreters (a few seconds each)."""
    procs = {
        name: subprocess.Popen(
            [sys.executable, "train.py", "--recipe", name, "--dry-run"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},  # three processes share 2 cores
        )
        for name in (*DRY_RUNS, "no_such_recipe")
    }
    outputs = {name: p.communicate(timeout=120) for name, p in procs.items()}
    return {name: (procs[name].returncode, *outputs[name]) for name in procs}


@pytest.mark.parametrize("name", DRY_RUNS)
def test_dry_run_counts_the_base_models_parameters(dry_runs, name):
    code, out, err = dry_runs[name]
    assert code == 0, err
    (line,) = [line for line in out.splitlines() if "parameters" in line and ":" in line][:1]
    total = re.fullmatch(r"# parameters: (\d+)", line.strip())
    assert total, line  # a plain integer, so that scripts can read it
    assert 63_000_000 <= int(total.group(1)) <= 65_000_000
    assert f"# recipe: {name}" in out
    # the output is itself a recipe: the recipe with its batches planned for this machine
    assert Config.from_yaml(out) == planned(load_config(name), 1)[0]


def test_unknown_recipe_exits_2_with_one_line_and_no_traceback(dry_runs):
    code, out, err = dry_runs["no_such_recipe"]
    assert code == 2 and out == "" and "Traceback" not in err
    assert (
        err
        == f"error: unknown recipe 'no_such_recipe'; valid recipes: {', '.join(recipe_names())}\n"
    )


def test_shipped_recipes_include_the_baseline_variants_and_quickstart():
    names = set(recipe_names())
    assert {"base", "v2_rope_rmsnorm", "quickstart", "big", "pre_norm"} <= names


@pytest.mark.parametrize("name", recipe_names())
def test_every_recipe_resolves_to_a_valid_config(name):
    cfg = load_config(name)
    assert isinstance(cfg, Config)
    assert "parent" not in load_raw(name)
    if name != "base":  # every recipe derives from base: it keeps base's keys it does not set
        assert set(load_raw("base")) <= set(load_raw(name))


def test_v2_and_one_swap_recipes_change_what_they_say():
    base, v2 = load_config("base"), load_config("v2_rope_rmsnorm")
    assert (v2.model.positional, v2.model.norm, v2.model.ffn) == ("rope", "rmsnorm", "swiglu")
    assert v2.data == base.data and v2.train == base.train
    assert load_config("pre_norm").model.norm_position == "pre"
    assert load_config("base_untied").model.tie_embeddings == "none"
    for recipe, key, value in (
        ("base_relative_positions", "positional", "relative"),
        ("base_t5_bias", "positional", "t5"),
        ("base_multi_query", "n_kv_heads", 1),
        ("base_grouped_query", "n_kv_heads", 2),
        ("base_qk_norm", "qk_norm", True),
    ):  # one swap: that key, the rest base's
        assert load_config(recipe) == replace(base, model=replace(base.model, **{key: value}))
    big = load_config("big")
    assert (big.model.d_model, big.model.n_heads, big.train.max_steps) == (1024, 16, 300000)
    assert big.model.norm == "layernorm"  # inherited from base through the parent chain


@pytest.mark.parametrize("name", [n for n in recipe_names() if n.startswith("base_")])
def test_a_base_recipe_is_one_swap_away_from_base(name):
    """base_<name>: one model key differs from base, and nothing else."""
    base, swap = load_config("base"), load_config(name)
    assert swap.data == base.data and swap.train == base.train and swap.decode == base.decode
    old, new = base.model.__dict__, swap.model.__dict__
    assert len([key for key in old if old[key] != new[key]]) == 1


def test_recipe_round_trips_through_a_users_file(tmp_path):
    cfg = load_config("quickstart", ["model.positional=rope", "train.betas=[0.9, 0.99]"])
    path = tmp_path / "mine.yaml"
    path.write_text(cfg.to_yaml())
    assert load_config(str(path)) == cfg
    with pytest.raises(ConfigError, match="not found"):
        load_config(str(tmp_path / "missing.yaml"))


def test_parent_chain_merges_deeply(tmp_path, monkeypatch):
    monkeypatch.setattr(t2.recipes, "RECIPES_DIR", tmp_path)
    (tmp_path / "a.yaml").write_text("model: {d_model: 64, n_heads: 4}\ntrain: {seed: 3}\n")
    (tmp_path / "b.yaml").write_text("parent: a\nmodel: {n_heads: 2}\n")
    (tmp_path / "c.yaml").write_text("parent: b\nmodel: {d_ff: 128}\n")
    cfg = load_config("c")
    assert (cfg.model.d_model, cfg.model.n_heads, cfg.model.d_ff, cfg.train.seed) == (64, 2, 128, 3)
    (tmp_path / "a.yaml").write_text("parent: c\n")
    with pytest.raises(ConfigError, match="its own ancestor: c -> b -> a -> c"):
        load_config("c")
    (tmp_path / "a.yaml").write_text("parent: nope\n")
    with pytest.raises(ConfigError, match="unknown recipe 'nope'; valid recipes: a, b, c$"):
        load_config("c")
    (tmp_path / "a.yaml").write_text("model: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config("c")
    (tmp_path / "a.yaml").write_text("- model\n- train\n")
    with pytest.raises(ConfigError, match="a.yaml must be a mapping"):
        load_config("c")


def test_a_saved_config_that_is_not_yaml_or_not_a_mapping_is_one_line():
    with pytest.raises(ConfigError, match="run/config.yaml is not valid YAML"):
        Config.from_yaml("model: [unclosed\n", "run/config.yaml")
    with pytest.raises(ConfigError, match="must be a mapping of sections, got list"):
        Config.from_yaml("- 1\n- 2\n")


def test_overrides_parse_values_as_yaml():
    raw = apply_overrides(
        {"model": {"d_model": 512}},
        [
            "model.d_model=64",
            "model.dropout=0.25",
            "model.bias=false",
            "train.betas=[0.9, 0.99]",
            "data.tokenizer=",
            "model.norm = rmsnorm",
        ],
    )
    assert raw["model"] == {"d_model": 64, "dropout": 0.25, "bias": False, "norm": "rmsnorm"}
    assert raw["train"] == {"betas": [0.9, 0.99]} and raw["data"] == {"tokenizer": ""}
    assert load_config("base", ["model.n_heads=4"]).model.n_heads == 4


def test_floats_in_scientific_notation_without_a_dot_are_floats(tmp_path):
    cfg = load_config("base", ["train.max_lr=1e-3", "train.eps=1E-9", "train.betas=[0.9, 1e0]"])
    assert (cfg.train.max_lr, cfg.train.eps, cfg.train.betas) == (1e-3, 1e-9, (0.9, 1.0))
    (tmp_path / "mine.yaml").write_text("parent: quickstart\ntrain:\n  min_lr: 5e-5\n")
    assert load_config(str(tmp_path / "mine.yaml")).train.min_lr == 5e-5
    assert Config.from_yaml(cfg.to_yaml()) == cfg


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["model.d_model"], "bad override 'model.d_model'; write --set section.key=value"),
        (["d_model=64"], "bad override 'd_model=64'"),
        (["model.=64"], "bad override"),
        (["modle.d_model=64"], "unknown config section 'modle'; valid keys: data, decode, model"),
        (["model.dmodel=64"], "unknown key in section 'model' 'dmodel'; valid keys: attention,"),
        (["model.norm=batchnorm"], "'batchnorm'; valid choices: layernorm, rmsnorm"),
        (["model.d_model=[64"], "model.d_model=\\[64"),  # not YAML
        (["model.d_model=64.5"], "model.d_model must be int"),
        (["model.n_heads=0"], "model.n_heads must be positive"),
    ],
)
def test_bad_overrides_fail_with_one_line(overrides, message):
    with pytest.raises(ConfigError, match=message) as err:
        load_config("base", overrides)
    assert "\n" not in str(err.value)


def test_override_of_a_section_left_empty_in_a_recipe(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("model:\ntrain:\n")  # sections present but empty (null)
    assert load_config(str(path), ["model.d_model=64"]).model.d_model == 64


def _train_py(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """Run train.py in-process (no interpreter start-up); any non-T2Error propagates."""
    monkeypatch.setattr(sys, "argv", ["train.py", *args, "--dry-run"])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_path(str(ROOT / "train.py"), run_name="__main__")
    out, err = capsys.readouterr()
    return exit_.value.code, out, err


@pytest.mark.parametrize(
    "args, valid",
    [
        (["--recipe", "nope"], ", ".join(recipe_names())),
        (["--recipe", "base", "--set", "model.dmodel=3"], "d_ff, d_model, dropout"),
        (["--recipe", "base", "--set", "model.ffn=relu2"], "geglu, gelu, relu, swiglu"),
        (
            ["--recipe", "base", "--set", "model.positional=xpos"],
            "alibi, learned, none, relative, rope, sinusoidal, t5",
        ),
        (["--recipe", "base", "--set", "model.norm_position=middle"], "valid choices: post, pre"),
        (["--recipe", "base", "--set", "modelnorm"], "write --set section.key=value"),
        (["--recipe", "base", "--set", "model.d_model=[1"], "model.d_model"),
    ],
)
def test_cli_mistakes_exit_2_with_one_line(monkeypatch, capsys, args, valid):
    code, out, err = _train_py(monkeypatch, capsys, *args)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert valid in err and "Traceback" not in err


def test_dry_run_counts_the_vocabulary_the_run_will_train():
    """model.vocab_size follows the tokenizer, so the count uses data.vocab_size (8000 in
    multi30k_peer), not model.vocab_size's default of 37000."""
    from t2.config import ModelConfig
    from t2.describe import describe
    from t2.model.transformer import Transformer

    cfg = load_config("multi30k_peer")
    assert cfg.data.vocab_size == 8000 and cfg.model.vocab_size != 8000
    out = describe(cfg, "multi30k_peer")
    with torch.device("meta"):
        shapes = dataclasses.asdict(cfg.model) | {"vocab_size": 8000}
        want = sum(p.numel() for p in Transformer(ModelConfig(**shapes)).parameters())
    assert f"# parameters: {want}\n" in out and "# vocabulary: 8000 (data.vocab_size" in out
    assert "#   embeddings: 2,048,000" in out  # 8000 x 256, tied


def test_recipes_ship_in_the_wheel(tmp_path):
    """A non-editable install (a wheel) carries the recipes: the package found outside the
    checkout resolves every recipe the checkout has."""
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            str(ROOT),
            "-w",
            str(tmp_path / "wheel"),
        ],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "wheel").glob("t2-*.whl")
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = "import t2.recipes as r; print(r.RECIPES_DIR); print(*r.recipe_names())"
    env = {k: v for k, v in os.environ.items() if k != "T2_RECIPES"}
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(site)},
        check=True,
    )
    folder, names = out.stdout.splitlines()
    assert Path(folder).is_relative_to(site)
    assert names.split() == recipe_names()


@pytest.mark.parametrize("value", ["/a#b", "files:/x#y", "https://h/p#frag", "run#3", '"/a #b"'])
def test_a_hash_that_is_no_yaml_comment_is_kept(value):
    cfg = load_config("base", [f"train.compile_cache={value}"])
    assert cfg.train.compile_cache == value.strip('"')


@pytest.mark.parametrize(
    "value",
    [
        *("/data/run #1", '"/a #b" #c', "'x' #y", "#x", "[a, b] #c", "/a#b #c"),
        *('"x"#c', "'x'#c", "[1, 2]#c", "{a: 1}#c"),  # right after a token: a comment too
    ],
)
def test_any_yaml_comment_in_a_set_value_is_refused_with_a_fix_the_shell_takes(value):
    """A comment after a quoted value too, not only at the first `#`: refused in one line
    whose suggested --set, read back by the shell, keeps the whole value."""
    import shlex

    from t2.errors import ConfigError

    with pytest.raises(ConfigError, match="as a comment; quote the value in YAML") as err:
        load_config("base", [f"train.compile_cache={value}"])
    message = str(err.value)
    assert "\n" not in message
    suggested = shlex.split(message.partition("e.g. ")[2])
    assert suggested[0] == "--set"
    assert load_config("base", suggested[1:]).train.compile_cache == value
