"""Components from outside t2 (t2.plugins): a plugin file or module registers with t2's own
decorators, is imported once, and says where it comes from; an installed package offers
its components through entry points without being imported; `--plugin` is imported
before the parser's choices are built; recipes and sweep files name plugins; and every
mistake is one line naming the file and the fix. Each test's plugins are forgotten after
it (t2.plugins.isolated), so no other test sees them."""

from __future__ import annotations

import contextlib
import io
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from t2.cli import build_parser, main, run_script
from t2.errors import ConfigError
from t2.model.norm import build_norm
from t2.plugins import isolated, load_plugin, load_plugins, loaded
from t2.recipes import load_config
from t2.registry import BUILT_IN, KINDS, NORM, SEARCH, offered

pytestmark = pytest.mark.usefixtures("single_thread")

NORM_PLUGIN = """\
import torch
from torch import nn

from t2.facts import Ct2, NormFacts
from t2.registry import NORM


@NORM.register("{name}", NormFacts(lambda d: d, lambda d: d, Ct2(unexpressed="a probe")))
class Gain(nn.Module):
    def __init__(self, d_model, eps):
        super().__init__()
        self.g = nn.Parameter(torch.full((d_model,), 2.0))

    def forward(self, x):
        return self.g * x
"""


@pytest.fixture(autouse=True)
def forget_plugins():
    with isolated():
        yield


def plugin(folder: Path, name: str, text: str) -> Path:
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def t2(*args) -> tuple[int, str, str]:
    """`t2 ARGS` in this process: exit status, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    captured = contextlib.redirect_stdout(out), contextlib.redirect_stderr(err)
    with captured[0], captured[1], pytest.raises(SystemExit) as done:
        main([str(a) for a in args])
    return done.value.code, out.getvalue(), err.getvalue()


def test_a_plugin_file_registers_with_t2_s_decorator_once_and_says_where_it_is_from(tmp_path):
    path = plugin(tmp_path, "gain", NORM_PLUGIN.format(name="gain"))
    first = load_plugin(path)
    assert first.registers == ("norm gain",) and first.sha256 and first.is_file
    assert NORM.origin("gain") == f"plugin file {path}" and NORM.origin("layernorm") == BUILT_IN
    norm = build_norm("gain", 4, 1e-5)
    assert torch.equal(norm(torch.ones(1, 4)), torch.full((1, 4), 2.0))
    (tmp_path / "copy").mkdir()
    copy = tmp_path / "copy" / "gain.py"
    copy.write_bytes(path.read_bytes())
    assert load_plugin(path) is first and load_plugin(copy) is first  # the same code: once
    assert loaded() == [first]


def test_a_module_given_by_name_is_a_plugin_too(tmp_path, monkeypatch):
    plugin(tmp_path, "probe_norms", NORM_PLUGIN.format(name="gain_module"))
    monkeypatch.syspath_prepend(str(tmp_path))
    found = load_plugins(["probe_norms"])[0]
    assert found.registers == ("norm gain_module",) and not found.is_file
    assert NORM.origin("gain_module") == "probe_norms" and "gain_module" in NORM.names()


LINE_3_FAILS = "import torch\n\nimport a_module_that_is_not_there\n"
TWICE = NORM_PLUGIN.format(name="gain_twice")
UNKNOWN_KIND = """\
from t2.facts import Ct2, NormFacts
from t2.registry import register

register("nrom", "x", NormFacts(lambda d: d, lambda d: d, Ct2()))(object)
"""


@pytest.mark.parametrize(
    "text, words",
    [
        (LINE_3_FAILS, ["bad.py fails to import at line 3 (ModuleNotFoundError: No", "fix it"]),
        ("x = (\n", ["bad.py fails to import at line 1 (SyntaxError"]),
        ("import torch\nx = 1 / 0\n", ["at line 2 (ZeroDivisionError"]),
        (UNKNOWN_KIND, ["bad.py, at line 4: unknown kind of component 'nrom'; valid kinds: pos"]),
    ],
)
def test_a_failure_inside_a_plugin_is_one_line_naming_its_file_and_line(tmp_path, text, words):
    with pytest.raises(ConfigError) as err:
        load_plugin(plugin(tmp_path, "bad", text))
    message = str(err.value)
    assert all(w in message for w in words) and "\n" not in message, message


def test_a_name_registered_twice_names_both_files_and_a_half_loaded_plugin_is_forgotten(
    tmp_path,
):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = plugin(tmp_path / "a", "gain", TWICE)
    second = plugin(tmp_path / "b", "gain", TWICE + "\n# another version\n")
    load_plugin(first)
    with pytest.raises(ConfigError) as err:
        load_plugin(second)
    assert f"'gain_twice' is registered twice (plugin file {first} and plugin file {second})" in (
        str(err.value)
    )
    half = plugin(tmp_path, "half", NORM_PLUGIN.format(name="half") + "raise ValueError('x')\n")
    with pytest.raises(ConfigError, match="half.py fails to import at line 16 .ValueError: x."):
        load_plugin(half)
    assert "half" not in NORM.names()  # forgotten: a corrected file loads in this process
    half.write_text(NORM_PLUGIN.format(name="half"), encoding="utf-8")
    assert load_plugin(half).registers == ("norm half",)


@pytest.mark.parametrize(
    "spec, words",
    [
        ("missing/probe.py", ["plugin file", "probe.py not found; pass an existing .py file"]),
        ("no_such_plugin_module", ["neither a .py file nor an importable module"]),
        (".", ["is a folder; pass a .py file"]),
    ],
)
def test_a_plugin_that_is_not_there_is_one_line_with_the_fix(spec, words):
    with pytest.raises(ConfigError) as err:
        load_plugin(spec)
    assert all(w in str(err.value) for w in words) and "\n" not in str(err.value)


BAD_CONSTRUCTOR = NORM_PLUGIN.replace("def __init__(self, d_model, eps)", "def __init__(self, d)")
BAD_CONSTRUCTOR = BAD_CONSTRUCTOR.replace("(d_model,)", "(d,)")
BAD_SHAPE = NORM_PLUGIN.replace("return self.g * x", "return (self.g * x)[..., :1]")
NOT_A_SCHEME = """\
from torch import nn

from t2.facts import Ct2, PositionalFacts
from t2.registry import POSITIONAL


@POSITIONAL.register("plain", PositionalFacts(True, "none", lambda d, n: 0, Ct2()))
class Plain(nn.Module):
    def __init__(self, d_model, d_head, max_positions, base):
        super().__init__()
"""
BAD_KERNEL = """\
from t2.facts import KernelFacts
from t2.registry import ATTENTION


@ATTENTION.register("two_args", KernelFacts(fused=False))
def two_args(q, k):
    return q
"""
NO_VALUES = """\
from t2.facts import KernelFacts
from t2.registry import ATTENTION


@ATTENTION.register("no_values", KernelFacts(fused=False, values=True))
def no_values(q, k, v, key_padding, causal, dropout_p, bias=None):
    return q
"""


@pytest.mark.parametrize(
    "text, model, words",
    [
        (BAD_CONSTRUCTOR.format(name="probe"), {"norm": "probe"}, ["is called as (d_model, eps)"]),
        (BAD_SHAPE.format(name="probe"), {"norm": "probe"}, ["to (1, 2, 1); a norm keeps"]),
        (NOT_A_SCHEME, {"positional": "plain"}, ["builds a Plain, not a Positional"]),
        (BAD_KERNEL, {"attention": "two_args"}, ["is called as (q, k, v, key_padding"]),
        (
            NO_VALUES,
            {"attention": "no_values"},
            ["(q, k, v, key_padding, causal, dropout_p, bias, values)"],
        ),
    ],
)
def test_a_component_that_does_not_fit_its_kind_fails_when_built_in_one_line(
    tmp_path, tiny_model_config, text, model, words
):
    from t2.model.transformer import Transformer

    path = plugin(tmp_path, "misfit", text)
    load_plugin(path)
    with pytest.raises(ConfigError) as err:
        Transformer(tiny_model_config(**model))
    message = str(err.value)
    assert all(w in message for w in [*words, f"plugin file {path}", "its kind's interface"])
    assert "\n" not in message, message


@pytest.fixture
def package(tmp_path, monkeypatch):
    """An installed package seen by importlib.metadata: a dist-info with one entry point
    in t2.components, on sys.path (no pip); the entry points are read again after it."""
    dist = tmp_path / "t2_probe-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: t2-probe\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[t2.components]\nnorm.gain_pkg = t2_probe.norms\n")
    (tmp_path / "t2_probe").mkdir()
    (tmp_path / "t2_probe" / "__init__.py").write_text("")
    plugin(tmp_path / "t2_probe", "norms", NORM_PLUGIN.format(name="gain_pkg"))
    monkeypatch.syspath_prepend(str(tmp_path))
    offered.cache_clear()
    yield dist
    offered.cache_clear()
    for name in [m for m in sys.modules if m.startswith("t2_probe")]:
        del sys.modules[name]


def test_a_package_offers_components_through_entry_points_imported_when_used(package):
    assert "gain_pkg" in NORM.names() and NORM.origin("gain_pkg") == "package t2-probe 0.1"
    assert "t2_probe.norms" not in sys.modules  # known from its metadata, not imported
    code, out, _ = t2("components", "--kind", "norm")
    assert code == 0 and "gain_pkg" in out and "package t2-probe 0.1" in out
    assert build_norm("gain_pkg", 4, 1e-5).g.shape == (4,)  # imported now
    assert "t2_probe.norms" in sys.modules and NORM.origin("gain_pkg") == "package t2-probe 0.1"


def test_a_package_s_broken_entry_point_is_one_line_naming_the_package(package):
    (package / "entry_points.txt").write_text("[t2.components]\nnrom.gain_pkg = t2_probe.x\n")
    offered.cache_clear()
    code, _, err = t2("components")
    assert code == 2 and err.count("\n") == 1
    assert "'nrom.gain_pkg'" in err and "t2-probe 0.1" in err and "valid" not in err
    (package / "entry_points.txt").write_text("[t2.components]\nnorm.gone = t2_probe.gone\n")
    offered.cache_clear()
    with pytest.raises(ConfigError, match="'gone' of package t2-probe 0.1 .t2_probe.gone.: t2_p"):
        build_norm("gone", 4, 1e-5)


def test_components_lists_every_kind_with_its_origin(tmp_path):
    path = plugin(tmp_path, "gain", NORM_PLUGIN.format(name="gain"))
    code, out, _ = t2("components", "--plugin", path)
    rows = [line.split() for line in out.splitlines()[1:]]
    assert code == 0 and {r[0] for r in rows} == set(KINDS)
    assert ["norm", "gain", "model.norm", "plugin", "file", str(path)] in rows
    assert ["positional", "rope", "model.positional", "built", "in"] in rows
    assert len(rows) == sum(len(r.names()) for r in KINDS.values())


SEARCH_PLUGIN = """\
from t2.decoding.search.greedy import greedy
from t2.facts import Ct2, SearchFacts
from t2.registry import SEARCH


@SEARCH.register("first_choice", SearchFacts(Ct2(unexpressed="a probe"), reads=()))
def first_choice(cfg, generator):
    return greedy(cfg, generator)
"""


def test_plugins_are_imported_before_the_parser_takes_its_choices(tmp_path):
    path = plugin(tmp_path, "first_choice", SEARCH_PLUGIN)
    missing = tmp_path / "no_run"
    argv = ["translate", "--search", "first_choice", "--checkpoint", missing]
    with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
        build_parser().parse_args([str(a) for a in argv])  # not a choice without it
    code, _, err = t2(*argv, "--plugin", path)
    assert code == 2 and "invalid choice" not in err and f"{missing} not found" in err
    assert "first_choice" in SEARCH.names()


def test_the_scripts_import_plugins_before_their_parser_too(tmp_path):
    path = plugin(tmp_path, "first_choice", SEARCH_PLUGIN)
    err = io.StringIO()
    argv = [
        "--search",
        "first_choice",
        "--checkpoint",
        str(tmp_path / "no_run"),
        "--plugin",
        str(path),
    ]
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as done:
        run_script("evaluate", argv)  # evaluate_model.py
    assert done.value.code == 2 and "no_run not found" in err.getvalue(), err.getvalue()


def test_a_recipe_names_its_plugins_relative_to_itself_after_its_parent_s(tmp_path):
    (tmp_path / "plugins").mkdir()
    plugin(tmp_path / "plugins", "gain", NORM_PLUGIN.format(name="gain"))
    plugin(tmp_path, "gain2", NORM_PLUGIN.format(name="gain2"))
    parent = tmp_path / "parent.yaml"
    parent.write_text("parent: quickstart\nplugins: [plugins/gain.py]\nmodel: {norm: gain}\n")
    (tmp_path / "sub").mkdir()
    child = tmp_path / "sub" / "child.yaml"
    child.write_text(f"parent: {parent}\nplugins: [../gain2.py]\n")
    cfg = load_config(str(child), trust_plugins=True)  # a YAML's plugins: only when trusted
    assert cfg.model.norm == "gain" and "gain2" in NORM.names()
    assert [p.registers for p in loaded()] == [("norm gain",), ("norm gain2",)]
    child.write_text(f"parent: {parent}\nplugins: gain2.py\n")
    with pytest.raises(ConfigError, match="plugins must be a list of .py files"):
        load_config(str(child), trust_plugins=True)


def test_a_sweep_arm_sets_a_plugin_s_name_and_its_runs_get_the_plugin(tmp_path):
    from t2.experiments.sweeps.sweepfile import load_sweep

    path = plugin(tmp_path, "gain", NORM_PLUGIN.format(name="gain"))
    sweep_file = tmp_path / "gain.yaml"
    arms = "arms: {base: {}, gain: {set: {model.norm: gain}}}"
    sweep_file.write_text(f"base: quickstart\nseeds: [2]\nplugins: [gain.py]\n{arms}\n")
    sweep = load_sweep(sweep_file, trust_plugins=True)  # a YAML's plugins: only when trusted
    command = sweep.command(sweep.arm("gain"), 2, tmp_path / "out", "disabled")
    assert command[command.index("--plugin") + 1] == str(path)
    assert "model.norm=gain" in command and "--trust-plugins" in command
    out_dir = tmp_path / "out"
    code, out, _ = t2("sweep", sweep_file, "--out", out_dir, "--dry-run", "--trust-plugins")
    assert code == 0 and out.count(f"--plugin {path}") == 2  # both arms' runs


def test_the_sanity_suite_takes_a_plugin_s_component_as_a_swap(tmp_path):
    path = plugin(tmp_path, "gain", NORM_PLUGIN.format(name="gain"))
    code, out, _ = t2("sanity", "--plugin", path, "--list", "--tasks", "copy", "--out", tmp_path)
    assert code == 0 and "gain " in out and "sinusoidal gain relu post" in out
