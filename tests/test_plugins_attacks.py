"""Code and files from a downloaded folder (issue 53): each attack as a user would meet
it, one short test each. No code runs and no file is written outside its folder from
anything downloaded without --trust-plugins / trust_plugins=True (docs/components.md,
"No code runs from a downloaded folder unless asked").

    attack                                                      test
    1  a manifest entry "../../.bashrc" with no names, exported  test_a_manifest_path_outside_plugins_writes_nothing
    2  an hf folder plus an empty COMPLETE / checkpoints/ /      test_an_hf_folder_plus_a_run_s_marker_runs_no_plugin
       config.yaml, opened by translate or evaluate_model.py
    3  a Hub id whose cache holds a run layout                   test_a_hub_snapshot_is_never_a_run_folder
       a `hf download --local-dir` folder with a run layout      test_a_local_dir_download_is_never_a_run_folder
    4  plugins: in a downloaded recipe or sweep file, on          test_a_yaml_s_plugins_run_only_when_asked
       --dry-run, sweep --plan and --report-only
    5  the refusal names one plugin only                         test_the_refusal_lists_every_entry_with_its_sha256
       --trust-plugins ran "../tokenizer_helper.py"              test_trust_runs_no_file_from_outside_plugins
       a class whose __module__ claims a built-in's              test_a_class_claiming_a_built_in_module_is_refused
       absolute local paths in manifests and cards               test_no_local_path_goes_into_a_manifest_or_a_card

A plugin of these attacks writes the file PWNED when imported: the tests look for it.
"""  # noqa: E501

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import re
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from hub_cache import cache_repo
from test_plugins import NORM_PLUGIN, t2
from toy_task import build_tokenizer, tiny_config, toy_pairs, write_run

from t2.atomic import sha256
from t2.cli import run_script
from t2.errors import CheckpointError, ConfigError
from t2.exporting import export
from t2.facts import Ct2, NormFacts
from t2.model.transformer import Transformer
from t2.opener import open_model
from t2.plugins import isolated, load_plugin, loaded
from t2.registry import Registry
from t2.rundir import carry_plugins, keep_plugins

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(autouse=True)
def fresh():
    with isolated():
        yield


def evil(folder: Path, name: str = "evil.py") -> dict:
    """A plugin file that leaves PWNED beside the test's folder when imported; its entry."""
    marker = folder.parent / "PWNED"
    code = f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"
    (folder / "plugins").mkdir(parents=True, exist_ok=True)
    (folder / "plugins" / name).write_text(code)
    return {"file": name, "sha256": sha256(folder / "plugins" / name), "registers": ["norm evil"]}


def manifest(folder: Path, *entries: dict) -> None:
    (folder / "plugins").mkdir(parents=True, exist_ok=True)
    text = json.dumps({"format": 1, "plugins": list(entries)})
    (folder / "plugins" / "manifest.json").write_text(text)


def ran(folder: Path) -> bool:
    return (folder.parent / "PWNED").exists()


def hf_shaped(folder: Path) -> Path:
    """The files that make a folder an hf folder (their contents are never reached)."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"")
    return folder


@pytest.fixture(scope="module")
def hf(tmp_path_factory):
    """A real hf export of a tiny run that keeps a plugin: what a user downloads."""
    root = tmp_path_factory.mktemp("attacks")
    texts = [t for pair in toy_pairs(60, 5) for t in pair]
    tokenizer = build_tokenizer(texts, root / "tok", vocab_size=60)
    given = root / "gain.py"
    given.write_text(NORM_PLUGIN.format(name="attack_gain"))
    with isolated():
        load_plugin(given)
        torch.manual_seed(0)
        cfg = tiny_config(len(tokenizer), d_model=16, n_heads=2, d_ff=32)
        cfg = replace(cfg, data=replace(cfg.data, test=f"files:{root}/data/test"))
        run = write_run(root / "run", Transformer(cfg.model).eval(), cfg, tokenizer, (1,))
        keep_plugins(run, loaded())
        out = export(run, "hf", root / "hf")
    return out


def test_a_manifest_path_outside_plugins_writes_nothing(hf, tmp_path):
    downloaded = tmp_path / "dl" / "hf"
    shutil.copytree(hf, downloaded)
    (tmp_path / "dl" / ".bashrc").write_text("evil")  # where ../../.bashrc points from plugins/
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / ".bashrc").write_text("mine")
    entry = {"file": "../../.bashrc", "sha256": sha256(tmp_path / "dl" / ".bashrc")}
    manifest(downloaded, {**entry, "registers": []})
    out = tmp_path / "work" / "out"
    code, _, err = t2("export", downloaded, "--format", "ct2", "--out", out)
    assert code == 2 and err.count("\n") == 1 and "not a plain .py file name" in err, err
    assert (tmp_path / "work" / ".bashrc").read_text() == "mine" and not out.exists()
    assert sorted(p.name for p in tmp_path.rglob(".bashrc")) == [".bashrc", ".bashrc"]


@pytest.mark.parametrize("marker", ["COMPLETE", "checkpoints", "config.yaml"])
def test_an_hf_folder_plus_a_run_s_marker_runs_no_plugin(tmp_path, marker):
    folder = hf_shaped(tmp_path / "dl")
    manifest(folder, evil(folder))
    (folder / marker).mkdir() if marker == "checkpoints" else (folder / marker).write_text("")
    src = tmp_path / "src.txt"
    src.write_text("a b\n")
    code, _, err = t2("translate", "--checkpoint", folder, "--input", src)
    assert code == 2 and err.count("\n") == 1 and not ran(folder), err
    stderr = io.StringIO()
    argv = ["--checkpoint", str(folder), "--src", str(src), "--ref", str(src)]
    with contextlib.redirect_stderr(stderr), pytest.raises(SystemExit):
        run_script("evaluate", argv)  # evaluate_model.py
    assert not ran(folder), stderr.getvalue()


def run_layout(folder: Path) -> Path:
    """A run directory's marks (config.yaml, checkpoints/) and a plugin."""
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "config.yaml").write_text("model: {}\n")
    manifest(folder, evil(folder))
    return folder


def test_a_hub_snapshot_is_never_a_run_folder(tmp_path, offline_cache):
    cache_repo(run_layout(tmp_path / "pushed"), "evil/m", offline_cache)
    snapshot = next(offline_cache.rglob("snapshots/*"))
    with pytest.raises(CheckpointError, match="downloaded from the Hugging Face Hub"):
        open_model("evil/m")
    src = tmp_path / "src.txt"
    src.write_text("a b\n")
    code, _, err = t2("translate", "--checkpoint", "evil/m", "--input", src)
    assert code == 2 and "downloaded from the Hugging Face Hub" in err, err
    assert not ran(snapshot) and not ran(tmp_path / "pushed")


def test_a_local_dir_download_is_never_a_run_folder(tmp_path):
    folder = run_layout(tmp_path / "dl")
    (folder / ".cache" / "huggingface" / "download").mkdir(parents=True)  # hf download's
    src = tmp_path / "src.txt"
    src.write_text("a b\n")
    code, _, err = t2("translate", "--checkpoint", folder, "--input", src)
    assert code == 2 and "downloaded from the Hugging Face Hub" in err and not ran(folder), err


def test_a_yaml_s_plugins_run_only_when_asked(tmp_path):
    folder = tmp_path / "dl"
    entry = evil(folder)
    plugin = folder / "plugins" / entry["file"]
    recipe = folder / "recipe.yaml"
    recipe.write_text("parent: quickstart\nplugins: [plugins/evil.py]\n")
    sweep = folder / "sweep.yaml"
    sweep.write_text("base: quickstart\nseeds: [1]\nplugins: [plugins/evil.py]\narms: {a: {}}\n")
    out = tmp_path / "out"
    out.mkdir()
    for args in (
        ("train", "--recipe", recipe, "--dry-run"),
        ("sweep", sweep, "--plan", "--out", out),
        ("sweep", sweep, "--report-only", "--out", out),
    ):
        code, _, err = t2(*args)
        assert code == 2 and err.count("\n") == 1 and not ran(folder), err
        assert "lists plugins" in err and "--trust-plugins" in err and "--plugin" in err, err
    with isolated():  # the same file typed on the command line: the user's own
        code, _, err = t2("train", "--recipe", recipe, "--dry-run", "--plugin", plugin)
        assert code == 0 and ran(folder), err


def test_the_refusal_lists_every_entry_with_its_sha256(tmp_path):
    folder = hf_shaped(tmp_path / "dl")
    first, second = evil(folder), evil(folder, "other.py")
    second["sha256"] = sha256(folder / "plugins" / "other.py")
    manifest(folder, first, {**second, "registers": []})
    with pytest.raises(CheckpointError) as refused:
        open_model(folder)
    line = str(refused.value)
    assert "\n" not in line and not ran(folder)
    for entry in (first, second):
        assert f"plugins/{entry['file']} (SHA-256 {entry['sha256']})" in line, line


def test_trust_runs_no_file_from_outside_plugins(tmp_path):
    folder = hf_shaped(tmp_path / "dl")
    outside = evil(tmp_path / "dl" / "x")  # dl/x/plugins/evil.py: reached as ../x/plugins/...
    manifest(folder, {**outside, "file": "../x/plugins/evil.py"})
    src = tmp_path / "src.txt"
    src.write_text("a b\n")
    code, _, err = t2("translate", "--checkpoint", folder, "--input", src, "--trust-plugins")
    assert code == 2 and err.count("\n") == 1 and "not a plain .py file name" in err, err
    assert not ran(tmp_path / "dl" / "x") and not ran(folder)


def test_a_class_claiming_a_built_in_module_is_refused():
    norms = Registry("normalisation (model.norm)", "norm", "t2.model.norm", NormFacts)

    class Impostor(torch.nn.Module):
        pass

    Impostor.__module__ = "t2.model.norm.rmsnorm"  # claims to be the built-in rmsnorm
    facts = NormFacts(lambda d: d, lambda d: d, Ct2(unexpressed="a probe"))
    with pytest.raises(ConfigError, match="'rmsnorm' is built in"):
        norms.register("rmsnorm", facts)(Impostor)
    assert "rmsnorm" not in norms.registered()


def test_no_local_path_goes_into_a_manifest_or_a_card(hf):
    root = str(hf.parent)  # the run's data.test is files:ROOT/data/test, its plugin ROOT/gain.py
    for written in ("plugins/manifest.json", "README.md"):
        assert root not in (hf / written).read_text(), written
    assert "files:test" in (hf / "README.md").read_text()  # a path by its name only
    assert (hf / "plugins" / "gain.py").is_file()
    assert 'from_pretrained("hf", trust_plugins=True)' in (hf / "README.md").read_text()


# review of the first fixes: the attacks that still got through


def downloaded_run(hf: Path, tmp_path: Path) -> Path:
    """The run the hf fixture was exported from, in a subfolder of a `hf download
    --local-dir` folder, its plugin replaced by one that leaves PWNED."""
    (tmp_path / "dl" / ".cache" / "huggingface" / "download").mkdir(parents=True)
    run = tmp_path / "dl" / "model"
    shutil.copytree(hf.parent / "run", run)
    shutil.rmtree(run / "plugins")
    manifest(run, evil(run))
    return run


@pytest.mark.parametrize("where", ["run", "checkpoint"])
def test_a_run_inside_a_local_dir_download_runs_no_plugin(hf, tmp_path, where):
    run = downloaded_run(hf, tmp_path)
    folder = run if where == "run" else next((run / "checkpoints").glob("step-*"))
    src = tmp_path / "src.txt"
    src.write_text("a b\n")
    code, _, err = t2("translate", "--checkpoint", folder, "--input", src)
    assert code == 2 and "downloaded from the Hugging Face Hub" in err and not ran(run), err


def _reader(name: str, run: Path, out: Path) -> Callable[[], object]:
    """Each way a run folder is read without the opener."""
    from t2.experiments.sweeps.robust import suite
    from t2.formats.run import load_run
    from t2.rundir import load_model

    return {
        "average": lambda: t2("average", run, "--last", "1", "--out", out),
        "figures": lambda: t2("figures", run, "--out", out),
        "train --resume": lambda: t2(
            "train", "--recipe", "quickstart", "--resume", "--out", run, "--dry-run"
        ),
        "load_model": lambda: load_model(run),
        "load_run": lambda: load_run(run, 0, "cpu"),
        "robustness suite": lambda: suite(SimpleNamespace(path=run), "cpu"),
    }[name]


@pytest.mark.parametrize(
    "reader",
    ["average", "figures", "train --resume", "load_model", "load_run", "robustness suite"],
)
def test_every_reader_of_a_downloaded_run_refuses_its_plugin(hf, tmp_path, reader):
    run = downloaded_run(hf, tmp_path)
    out = tmp_path / "out"
    try:
        result = _reader(reader, run, out)()
    except CheckpointError as err:
        result = (2, "", str(err))
    assert result[0] == 2 and "carries plugin code" in result[2], result
    assert "--trust-plugins" in result[2] and not ran(run) and not out.exists()


def test_a_plugin_naming_its_module_after_a_built_in_is_refused(tmp_path):
    norms = Registry("normalisation (model.norm)", "norm", "t2.model.norm", NormFacts)
    file = tmp_path / "impostor.py"
    file.write_text(
        '__name__ = "t2.model.norm.rmsnorm"  # what the built-in module calls itself\n'
        "class RMSNorm(torch.nn.Module):\n    pass\n"
        'norms.register("rmsnorm", facts)(RMSNorm)\n'
    )
    facts = NormFacts(lambda d: d, lambda d: d, Ct2(unexpressed="a probe"))
    code = compile(file.read_text(), str(file), "exec")
    with pytest.raises(ConfigError, match="'rmsnorm' is built in"):
        exec(code, {"torch": torch, "norms": norms, "facts": facts})
    assert "rmsnorm" not in norms.registered()


def test_a_link_to_a_hub_snapshot_is_never_a_run_folder(tmp_path, offline_cache):
    snapshot = cache_repo(run_layout(tmp_path / "pushed"), "evil/m", offline_cache)
    link = tmp_path / "mylink"
    link.symlink_to(snapshot)
    src = tmp_path / "src.txt"
    src.write_text("a b\n")
    code, _, err = t2("translate", "--checkpoint", link, "--input", src)
    assert code == 2 and "downloaded from the Hugging Face Hub" in err, err
    assert not ran(snapshot) and not ran(link)


def test_a_link_in_plugins_to_a_file_outside_is_refused_even_when_trusted(tmp_path):
    folder = hf_shaped(tmp_path / "dl" / "hf")
    outside = evil(tmp_path / "dl" / "x")  # dl/x/plugins/evil.py
    (folder / "plugins").mkdir()
    (folder / "plugins" / "evil.py").symlink_to("../../x/plugins/evil.py")
    manifest(folder, outside)
    src = tmp_path / "src.txt"
    src.write_text("a b\n")
    code, _, err = t2("translate", "--checkpoint", folder, "--input", src, "--trust-plugins")
    assert code == 2 and err.count("\n") == 1 and "outside" in err, err
    out = tmp_path / "out"
    with pytest.raises(CheckpointError, match="outside"):
        carry_plugins(folder, out)
    assert not ran(tmp_path / "dl" / "x") and not (out / "plugins" / "evil.py").exists()


def test_no_absolute_local_path_goes_into_an_exported_folder(hf, tmp_path):
    run = tmp_path / "home" / "alice" / "run"
    shutil.copytree(hf.parent / "run", run)
    root = str(tmp_path)
    changes = {"test": f"files:{root}/data/test", "tokenizer": f"{root}/tok"}
    cfg_path = run / "config.yaml"
    text = cfg_path.read_text()
    for key, value in {**changes, "cache_dir": f"{root}/cache"}.items():
        text = re.sub(rf"(?m)^(  {key}:).*$", rf"\1 {value}", text)
    cfg_path.write_text(text)
    for ckpt in (run / "checkpoints").glob("step-*"):
        shutil.copyfile(cfg_path, ckpt / "config.yaml")
    meta = json.loads((ckpt / "meta.json").read_text())  # the run's: as t2 train's, a recipe
    run_meta = {k: meta[k] for k in ("format", "t2", "torch", "world_size")}
    (run / "meta.json").write_text(json.dumps({**run_meta, "recipe": "/home/alice/exp/my.yaml"}))
    formats = ["hf"] + (["ct2"] if importlib.util.find_spec("ctranslate2") else [])
    for name in formats:
        out = export(run, name, tmp_path / "exports" / name)
        for file in (f for f in out.rglob("*") if f.is_file()):
            if file.suffix in (".safetensors", ".bin"):
                continue
            text = file.read_text(encoding="utf-8")
            assert root not in text and "/home/alice" not in text, (name, file)
            assert not re.search(r'"(files:)?/[^"]*"', text), (name, file)
    assert f"files:{root}" in cfg_path.read_text()  # the run's own config keeps its paths
