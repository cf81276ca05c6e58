"""The registries (t2.registry): built-in names read from a kind's package without importing
it, a name's module imported when it is resolved, facts required with every component,
and the public entry for components defined outside t2; every misuse is one ConfigError."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from t2.errors import ConfigError
from t2.facts import (
    Ct2,
    FfnFacts,
    KernelFacts,
    NormFacts,
    PositionalFacts,
    ResidualFacts,
    SearchFacts,
)
from t2.model.norm import build_norm
from t2.registry import (
    ATTENTION,
    BUILT_IN,
    EXPORT,
    FFN,
    KINDS,
    NORM,
    POSITIONAL,
    RESIDUAL,
    SEARCH,
    Registry,
    register,
    registry,
)

FACTS = {
    POSITIONAL: PositionalFacts,
    NORM: NormFacts,
    FFN: FfnFacts,
    RESIDUAL: ResidualFacts,
    ATTENTION: KernelFacts,
    SEARCH: SearchFacts,
    EXPORT: type(None),
}


def test_registry_rejects_duplicates_and_lists_names_of_unknowns():
    widgets: Registry = Registry("widget")
    widgets.register("b")(1)
    widgets.register("a")(2)
    with pytest.raises(ConfigError, match="widget 'a' is registered twice"):
        widgets.register("a")(3)
    assert widgets.get("a") == 2 and widgets.names() == ["a", "b"] and "b" in widgets
    with pytest.raises(ConfigError, match="unknown widget 'c'; valid choices: a, b$"):
        widgets.get("c")


def _probe_package(tmp_path, monkeypatch) -> Registry:
    """A kind whose package `probe_widgets` has modules a (registers a), b (registers
    nothing), c (registers d: the wrong name) and _shared (private: no component)."""
    package = tmp_path / "probe_widgets"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "_shared.py").write_text("")
    (package / "a.py").write_text(
        "from probe_registry import WIDGETS\n\n@WIDGETS.register('a')\ndef a():\n    return 41\n"
    )
    (package / "b.py").write_text("")
    (package / "c.py").write_text(
        "from probe_registry import WIDGETS\n\n@WIDGETS.register('d')\ndef c():\n    return 0\n"
    )
    (tmp_path / "probe_registry.py").write_text(
        "from t2.registry import Registry\n"
        "WIDGETS = Registry('widget', 'widget', 'probe_widgets')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m.startswith("probe_")]:
        monkeypatch.delitem(sys.modules, name)
    from probe_registry import WIDGETS

    return WIDGETS


def test_built_in_names_are_the_package_s_modules_and_import_one_when_resolved(
    tmp_path, monkeypatch
):
    widgets = _probe_package(tmp_path, monkeypatch)
    assert widgets.names() == ["a", "b", "c"] and widgets.check("a") == "a" and "b" in widgets
    assert not any(m.startswith("probe_widgets.") for m in sys.modules)  # nothing imported
    assert widgets.origin("b") == BUILT_IN
    with pytest.raises(ConfigError, match="unknown widget 'x'; valid choices: a, b, c$"):
        widgets.check("x")
    assert widgets.get("a")() == 41 and "probe_widgets.a" in sys.modules
    assert "probe_widgets.b" not in sys.modules  # only the module of the name resolved
    with pytest.raises(LookupError, match="probe_widgets.b registers no widget 'b'"):
        widgets.get("b")
    with pytest.raises(ConfigError, match="widget 'd' is an object of probe_widgets.c, a built"):
        widgets.get("c")


def _norm_facts(params=lambda d: d) -> NormFacts:  # noqa: ANN001
    return NormFacts(params=params, saved=lambda d: d, ct2=Ct2(unexpressed="a test's norm"))


class ScaleNormProbe(nn.Module):
    """g * x / ||x||, one learned scalar (the shape of ScaleNorm: a component from outside)."""

    def __init__(self, d_model: int, eps: float) -> None:
        super().__init__()
        self.g, self.eps = nn.Parameter(torch.ones(1)), eps

    def forward(self, x):  # noqa: ANN001, ANN201
        return self.g * x / x.norm(dim=-1, keepdim=True).clamp_min(self.eps)


@pytest.fixture
def norms(monkeypatch) -> Registry:
    """NORM with what a test registers forgotten afterwards."""
    monkeypatch.setattr(NORM, "_entries", dict(NORM._entries))
    return NORM


def test_a_component_from_outside_registers_under_its_own_name_with_its_facts(norms):
    register("norm", "scalenorm_probe", _norm_facts(lambda d: 1))(ScaleNormProbe)
    assert "scalenorm_probe" in norms.names() and norms.origin("scalenorm_probe") == __name__
    assert norms.facts("scalenorm_probe").ct2.unexpressed == "a test's norm"
    assert isinstance(build_norm("scalenorm_probe", 8, 1e-5), ScaleNormProbe)
    with pytest.raises(ConfigError, match="'scalenorm_probe' is registered twice"):
        register("norm", "scalenorm_probe", _norm_facts())(ScaleNormProbe)
    with pytest.raises(ConfigError, match="'rmsnorm' is built in .*; register yours under"):
        register("norm", "rmsnorm", _norm_facts())(ScaleNormProbe)
    with pytest.raises(ConfigError, match="comes without its facts: pass a t2.facts.NormFacts"):
        register("norm", "bare_probe")
    with pytest.raises(ConfigError, match="comes without its facts: pass a t2.facts.NormFacts"):
        register("norm", "wrong_probe", SearchFacts(Ct2(), reads=()))
    with pytest.raises(ConfigError, match="unknown kind of component 'normalization'; valid"):
        register("normalization", "x", _norm_facts())


def test_facts_that_do_not_describe_the_module_fail_when_it_is_built(norms):
    norms.register("miscounted_probe", _norm_facts(lambda d: 2 * d))(ScaleNormProbe)
    with pytest.raises(ConfigError) as err:
        build_norm("miscounted_probe", 8, 1e-5)
    assert "builds 1 parameters where its facts say 16" in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("kind", KINDS)
def test_every_built_in_name_resolves_to_its_implementation_and_facts(kind):
    chosen = registry(kind)
    assert chosen.key == kind and chosen.names()
    for name in chosen.names():
        assert chosen.get(name) is not None and chosen.origin(name) == BUILT_IN
        assert isinstance(chosen.facts(name), FACTS[chosen]), name


def test_docs_components_has_a_row_for_every_built_in_component():
    page = (Path(__file__).resolve().parent.parent / "docs" / "components.md").read_text()
    missing = [
        f"{kind} {name}"
        for kind, chosen in KINDS.items()
        for name in chosen.names()
        if f"| {kind} | `{name}` |" not in page
    ]
    assert missing == [], "add a row to docs/components.md for each"
