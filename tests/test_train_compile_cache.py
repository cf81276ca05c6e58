"""train.compile_cache (t2.train.compile_cache): the folder a run names, or beside the data
cache; one artifact file per model and compile settings; a second run with the folder
reaches its first step at least twice as fast, from the cache, and says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from t2.config import Config, DataConfig, ModelConfig, TrainConfig
from t2.train.compile_cache import CompileCache, folder, key

ROOT = Path(__file__).resolve().parent.parent


def config(data_cache: str = "", **train) -> Config:
    return Config(data=DataConfig(cache_dir=data_cache), train=TrainConfig(**train))


def test_the_folder_is_beside_the_data_cache_unless_the_run_names_one_or_none(tmp_path):
    assert folder(config(str(tmp_path))) == tmp_path / "compile"
    assert folder(config(compile_cache=str(tmp_path / "shared"))) == tmp_path / "shared"
    assert folder(config(compile_cache="off")) is None
    assert CompileCache.of(config(compile_cache="off"), "cpu") is None
    # dynamo's own backends keep nothing that a later run could reuse
    assert CompileCache.of(config(str(tmp_path), compile_backend="aot_eager"), "cpu") is None
    cache = CompileCache.of(config(str(tmp_path)), "cpu")
    assert cache.artifacts.parent == tmp_path / "compile" and cache.artifacts.suffix == ".bin"


def test_off_false_and_a_path_are_all_accepted_as_typed_on_the_command_line(tmp_path):
    """YAML reads `off` (which the compile cache's errors tell users to type) and `false`
    as false: both turn the cache off; a path names the folder; `true` is refused."""
    from t2.errors import ConfigError
    from t2.recipes import load_config

    for typed in ("off", "false", "Off", "no"):
        cfg = load_config("base", [f"train.compile_cache={typed}"])
        assert folder(cfg) is None, typed
        assert Config.from_yaml(cfg.to_yaml()).train.compile_cache == "off"
    cfg = load_config("base", [f"train.compile_cache={tmp_path / 'shared'}"])
    assert folder(cfg) == tmp_path / "shared"
    with pytest.raises(ConfigError, match="train.compile_cache must be off, false or a folder"):
        load_config("base", ["train.compile_cache=true"])


def test_home_is_written_with_a_slash_or_quoted_and_null_is_the_default(tmp_path):
    """`~/`, `'~'` and `~/x` name the home folder, from --set and from a recipe's YAML alike,
    kept as typed so a run's saved config means each machine's own home. YAML reads a bare
    `~`, `null` and nothing at all as null: that is the default (beside the data cache),
    never the home folder by accident."""
    from t2.recipes import load_config

    for typed, home in (("~/", Path.home()), ("'~'", Path.home()), ("~/x", Path.home() / "x")):
        for cfg in (
            load_config("base", [f"train.compile_cache={typed}"]),
            Config.from_yaml(f"train:\n  compile_cache: {typed}\n"),
        ):
            assert folder(cfg) == home, typed
            saved = Config.from_yaml(cfg.to_yaml()).train.compile_cache
            assert saved == typed.strip("'"), typed
    data = f"data:\n  cache_dir: {tmp_path}\n"
    for typed in ("", "null", "~"):
        for cfg in (
            load_config("base", [f"data.cache_dir={tmp_path}", f"train.compile_cache={typed}"]),
            Config.from_yaml(f"{data}train:\n  compile_cache: {typed}\n"),
        ):
            assert cfg.train.compile_cache == "", typed
            assert folder(cfg) == tmp_path / "compile", typed


def test_a_folder_that_yaml_would_cut_or_retype_is_refused_with_how_to_quote_it():
    """A value is YAML: ` #` starts a comment and `0` is a number. A --set value cut at
    ` #` is refused in one line that says to quote it, and a quoted one is kept whole; a
    value YAML reads as a number, true or a list is refused in one line that names the
    valid forms and the quoting."""
    from t2.errors import ConfigError
    from t2.recipes import load_config

    with pytest.raises(ConfigError, match=r"reads '#1' as a comment; quote the value") as err:
        load_config("base", ["train.compile_cache=/data/run #1"])
    assert "\n" not in str(err.value)
    quoted = load_config("base", ['train.compile_cache="/data/run #1"'])
    assert folder(quoted) == Path("/data/run #1")
    assert Config.from_yaml(quoted.to_yaml()).train.compile_cache == "/data/run #1"
    assert folder(Config.from_yaml("train:\n  compile_cache: '/data/run #1'\n")) == Path(
        "/data/run #1"
    )
    for typed, read in (("0", "0 (an int)"), ("on", "True (a bool)"), ("[a]", "['a'] (a list)")):
        with pytest.raises(ConfigError) as err:
            load_config("base", [f"train.compile_cache={typed}"])
        assert str(err.value) == (
            f"train.compile_cache must be off, false or a folder, got {read}; put a folder "
            f"name that YAML reads as another type in quotes"
        ), typed


def test_one_artifact_file_per_model_and_compile_settings_not_per_run():
    h100 = "NVIDIA H100 80GB HBM3"
    base = key(config(), h100)
    assert key(config(seed=7, max_steps=10, compile_cache="/elsewhere"), h100) == base
    assert key(config(), "NVIDIA H200") != base
    for other in ({"compile_mode": "graphs"}, {"padded_attention": "flex"}):
        assert key(config(**other), h100) != base, other
    wider = Config(model=ModelConfig(d_model=256), train=TrainConfig())
    assert key(wider, h100) != base


# a run's first compiled micro-batch, as prepare_training builds it, on a stand-in model
# with the training pass's signature (a few operators: inductor's C++ build of a whole
# Transformer takes minutes on this project's CPU, and the cache is the mechanism tested)
FIRST_STEP = """
import contextlib, json, sys
import torch
from t2.config import Config, TrainConfig
from t2.train.compile_cache import CompileCache
from t2.train.compiling import TrainingForward

class StandIn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed, self.out = torch.nn.Embedding(50, 8), torch.nn.Linear(8, 50)

    def forward(self, src, tgt_in, tgt_out, smoothing, scale, padded_attention="sdpa"):
        h = self.embed(tgt_in) + self.embed(src).mean(1, keepdim=True)
        loss = torch.nn.functional.cross_entropy(
            self.out(h).flatten(0, 1), tgt_out.flatten(), ignore_index=0,
            label_smoothing=smoothing, reduction="sum")
        return loss, tgt_out.ne(0).sum()

torch.set_num_threads(1)
torch.manual_seed(0)
cfg = Config(train=TrainConfig(compile=True, compile_cache=sys.argv[1]))
forward = TrainingForward(StandIn(), True, cache=CompileCache.of(cfg, "cpu"))
ids = torch.randint(3, 50, (4, 8))
batch = {"src": ids[:, :-1], "tgt_in": ids[:, :-1], "tgt_out": ids[:, 1:]}
forward.run(batch, 0.1, torch.tensor(0.05), lambda x: x.backward(), contextlib.nullcontext)
print(json.dumps({"first_s": forward.first_s, "note": forward.compile_note}))
"""


def first_step(cache: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-c", FIRST_STEP, str(cache)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_second_run_with_the_folder_reaches_its_first_step_twice_as_fast(tmp_path):
    cache = tmp_path / "compile"
    first = first_step(cache)
    assert first["note"] == f"compiled, saved to the compile cache {cache}"
    assert len(list(cache.glob("*.bin"))) == 1 and any((cache / "inductor").iterdir())
    second = first_step(cache)
    assert second["note"] == f"from the compile cache {cache}"
    assert 2 * second["first_s"] <= first["first_s"], (first, second)


def test_a_folder_that_cannot_be_made_fails_in_one_line_and_a_bad_file_is_a_warning(
    tmp_path, capsys, monkeypatch
):
    from t2.errors import ConfigError

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "")  # put back as it was after the test
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")  # unset: load() names its own
    (tmp_path / "a-file").write_text("")
    unmakeable = CompileCache.of(config(compile_cache=str(tmp_path / "a-file" / "c")), "cpu")
    with pytest.raises(ConfigError, match="cannot make .*; name a writable folder, or set"):
        unmakeable.load()
    cache = CompileCache.of(config(compile_cache=str(tmp_path / "c")), "cpu")
    cache.artifacts.parent.mkdir(parents=True)
    cache.artifacts.write_bytes(b"not torch's artifacts")
    cache.load()  # the run compiles as if the file were not there
    err = capsys.readouterr().err
    assert not cache.loaded and err.count("\n") == 1
    assert err.startswith(f"warning: the compile cache file {cache.artifacts} did not load")
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "c" / "inductor")
