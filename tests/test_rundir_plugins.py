"""A run of a plugin's component (the DyT example, examples/plugins/dyt.py) keeps a copy of
the plugin with its SHA-256 (t2.rundir.plugins; the sweep's tests check that training
writes it), and every later command of that run finds the copy without --plugin after the
original is gone: evaluate, translate, average, export, figures and --resume.
A different file of the same names is refused in one line; an exported hf folder carries
the copy, and from_pretrained, a folder and a hub repo id run it only when trusted."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from hub_cache import cache_repo
from test_plugins import t2
from test_train_runs import ROOT, TINY
from toy_task import build_tokenizer, tiny_config, toy_pairs, write_run

from t2.atomic import sha256
from t2.errors import CheckpointError
from t2.formats.run import load_run
from t2.hub import from_pretrained
from t2.model.transformer import Transformer
from t2.plugins import isolated, load_plugin, loaded
from t2.registry import NORM
from t2.rundir import keep_plugins

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("single_thread")]
EXAMPLE = ROOT / "examples" / "plugins" / "dyt.py"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run directory of a toy model with norm DyT (what `t2 train --plugin` writes: the
    sweep's tests train one), its plugin given from a copy that is deleted afterwards (the
    run then lives on a machine without it)."""
    root = tmp_path_factory.mktemp("plugin_run")
    given = root / "elsewhere" / "dyt.py"
    given.parent.mkdir()
    shutil.copyfile(EXAMPLE, given)
    texts = [t for pair in toy_pairs(200, 99) for t in pair]
    tokenizer = build_tokenizer(texts, root / "tok")
    with isolated():
        load_plugin(given)
        torch.manual_seed(0)
        layers = dict(n_heads=2, n_encoder_layers=1, n_decoder_layers=1)  # few figures
        cfg = tiny_config(len(tokenizer), norm="dyt", d_model=32, d_ff=64, **layers)
        cfg = replace(cfg, decode=cfg.decode.updated(search="greedy", max_len_b=6))  # quick
        model = Transformer(cfg.model).eval()
        folder = write_run(root / "run", model, cfg, tokenizer, steps=(1, 2))
        keep_plugins(folder, loaded())
    shutil.rmtree(given.parent)
    return folder, given


@pytest.fixture(autouse=True)
def fresh():
    """Each test starts without the plugin, as a new process would."""
    with isolated():
        assert "dyt" not in NORM.names()
        yield


def texts(tmp_path: Path) -> Path:
    src = tmp_path / "test.src"
    src.write_text("eins zwei drei\nhaus baum\n", encoding="utf-8")
    return src


def test_the_run_keeps_a_copy_of_the_plugin_with_its_sha256(run):
    folder, given = run
    manifest = json.loads((folder / "plugins" / "manifest.json").read_text())
    assert manifest == {
        "format": 1,
        "plugins": [
            {
                "file": "dyt.py",
                "sha256": sha256(EXAMPLE),
                "registers": ["norm dyt"],  # no local path: the manifest travels
            }
        ],
    }
    assert (folder / "plugins" / "dyt.py").read_bytes() == EXAMPLE.read_bytes()


def test_translate_and_evaluate_find_the_run_s_copy_without_the_flag(run, tmp_path):
    folder, _ = run
    src = texts(tmp_path)
    code, out, err = t2("translate", "--checkpoint", folder, "--input", src, "--device", "cpu")
    assert code == 0 and len(out.splitlines()) == 2, err
    assert NORM.origin("dyt") == f"plugin file {folder / 'plugins' / 'dyt.py'}"
    with isolated():
        code, out, err = t2(
            *("evaluate", "--checkpoint", folder, "--src", src, "--ref", src),
            *("--device", "cpu", "--show", "0", "--out", tmp_path / "eval"),
        )
        assert code == 0 and "BLEU" in out, err


def test_an_average_carries_the_copy_and_translates_from_it(run, tmp_path):
    folder, _ = run
    with isolated():
        assert t2("average", folder, "--last", "2", "--out", tmp_path / "avg")[0] == 0
    assert (tmp_path / "avg" / "plugins" / "dyt.py").read_bytes() == EXAMPLE.read_bytes()
    with isolated():  # the average is self-contained: its own copy
        code, _, err = t2("translate", "--checkpoint", tmp_path / "avg", "--input", texts(tmp_path))
        assert code == 0, err
        assert NORM.origin("dyt") == f"plugin file {tmp_path / 'avg' / 'plugins' / 'dyt.py'}"


def test_figures_find_the_run_s_copy_without_the_flag(run, tmp_path):
    args = ("--out", tmp_path / "figures", "--device", "cpu", "--sentence", "haus baum")
    code, out, err = t2("figures", run[0], *args)
    assert code == 0 and "attention_cross.png" in out, err


def test_resume_finds_the_copy_and_a_changed_plugin_is_refused_in_one_line(run, tmp_path):
    folder, _ = run
    sets = [arg for kv in [*TINY, "model.norm=dyt"] for arg in ("--set", kv)]
    resume = ("train", "--recipe", "quickstart", "--out", folder, "--resume", *sets)
    with isolated():
        code, out, err = t2(*resume, "--dry-run")
    assert code == 0 and "norm: dyt" in out, err
    changed = tmp_path / "dyt.py"
    changed.write_text(EXAMPLE.read_text() + "\n# a change\n", encoding="utf-8")
    with isolated():
        code, _, err = t2(*resume, "--dry-run", "--plugin", changed)
    assert code == 2 and err.count("\n") == 1, err
    assert f"plugin {changed} registers norm dyt with other code than the copy" in err
    assert "leave that --plugin out" in err
    with isolated():
        code, _, err = t2("translate", "--checkpoint", folder, "--plugin", changed)
    assert code == 2 and "other code than the copy" in err


def test_a_damaged_copy_is_refused_in_one_line(run, tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(run[0], folder)
    (folder / "plugins" / "dyt.py").write_text("print('changed')\n", encoding="utf-8")
    code, _, err = t2("translate", "--checkpoint", folder, "--input", texts(tmp_path))
    assert code == 2 and err.count("\n") == 1 and "does not match its SHA-256" in err, err


def test_an_hf_export_carries_the_plugin_and_runs_it_only_when_trusted(
    run, tmp_path, offline_cache
):
    folder, _ = run
    hf = tmp_path / "hf"
    with isolated():
        code, _, err = t2("export", folder, "--format", "hf", "--out", hf)
    assert code == 0 and (hf / "plugins" / "dyt.py").read_bytes() == EXAMPLE.read_bytes(), err
    card = (hf / "README.md").read_text(encoding="utf-8")
    assert "norm dyt is plugin code in `plugins/`" in card and ", trust_plugins=True)" in card
    with isolated():
        expected = load_run(folder).translate(["eins zwei drei"])
    with isolated(), pytest.raises(CheckpointError) as refused:
        from_pretrained(hf)
    named = f"carries plugin code (plugins/dyt.py (SHA-256 {sha256(EXAMPLE)}): norm dyt)"
    assert named in str(refused.value)
    assert "--trust-plugins (trust_plugins=True in Python)" in str(refused.value)
    with isolated():
        assert from_pretrained(hf, trust_plugins=True).translate(["eins zwei drei"]) == expected
    src = texts(tmp_path)
    repo = cache_repo(hf, "me/dyt", offline_cache) and "me/dyt"
    for target in (hf, repo):
        with isolated():
            code, _, err = t2("translate", "--checkpoint", target, "--input", src)
            assert code == 2 and err.count("\n") == 1 and "--trust-plugins" in err, err
        with isolated():
            code, out, err = t2(
                "translate", "--checkpoint", target, "--input", src, "--trust-plugins"
            )
            assert code == 0 and len(out.splitlines()) == 2, err
    with isolated():  # the user's own copy of the same code: no trust needed
        own = tmp_path / "mine" / "dyt.py"
        own.parent.mkdir()
        shutil.copyfile(EXAMPLE, own)
        code, _, err = t2("translate", "--checkpoint", hf, "--input", src, "--plugin", own)
        assert code == 0, err
