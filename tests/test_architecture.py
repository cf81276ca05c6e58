"""The package's shape, measured from its source: no import cycle among t2's modules or its
packages (imports inside functions and type-only imports count), every package importing
only from the layers below its own, a config floor that `t2 --help` loads without torch, no
function-level import of a t2 module outside the command layer, modules under 300 lines and
functions under 60."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "t2"
COMMAND_LAYER = ("t2.cli", "t2.commands")  # verbs import lazily so `t2 --help` stays quick
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 300, 60
# the packages from the bottom up: a package imports only from the layers below its own
LAYERS = (
    ("t2", "t2.errors", "t2.specials", "t2.machine", "t2.facts", "t2.installed"),
    ("t2.registry", "t2.atomic", "t2.progress", "t2.torch_compat"),
    ("t2.plugins",),  # imports a user's components: below every reader of a config
    ("t2.section",),
    ("t2.model", "t2.data"),  # each with its config section on the floor (CONFIG_FLOOR)
    ("t2.decoding",),
    ("t2.config",),
    ("t2.recipes", "t2.rundir", "t2.serve"),
    ("t2.hub",),
    ("t2.formats",),
    ("t2.opener",),
    ("t2.evaluation", "t2.exporting"),
    ("t2.train",),
    ("t2.describe", "t2.sanity", "t2.experiments"),
    ("t2.figures",),
    ("t2.commands",),
    ("t2.cli",),
    ("t2.__main__", "t2.torchrun"),  # entry points: `python -m t2`, `python -m t2.torchrun`
)
# the config layer: names, sections and recipes, checked without the code they configure;
# with the command layer it is all that `t2 --help` and `t2 VERB --help` import
CONFIG_FLOOR = {
    "t2",
    "t2.errors",
    "t2.atomic",
    "t2.facts",
    "t2.installed",
    "t2.registry",
    "t2.plugins",
    "t2.section",
    "t2.config",
    "t2.data",
    "t2.data.config",
    "t2.model",
    "t2.model.config",
    "t2.decoding",
    "t2.decoding.options",
    "t2.recipes",
    "t2.formats",
    "t2.formats.options",
    "t2.serve",
}
HEAVY = ("torch", "transformers", "accelerate", "datasets", "tokenizers", "sacrebleu", "numpy")


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


MODULES = _modules()


def _target(node: ast.ImportFrom | ast.Import, module: str, is_package: bool) -> list[str]:
    """The t2 modules an import statement names (a `from X import name` of a submodule
    names the submodule)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            parts = module.split(".")[: len(module.split(".")) - node.level + is_package]
            base = ".".join([*parts, base] if base else parts)
        names = [base, *(f"{base}.{a.name}" for a in node.names)]
    found = []
    for name in names:
        while name and name not in MODULES and "." in name:
            name = name.rsplit(".", 1)[0]
        if name in MODULES and name != module:
            found.append(name)
    return sorted(set(found))


def _imports(type_only: bool = False) -> tuple[dict[str, set[str]], list[str]]:
    """Each module's t2 imports (TYPE_CHECKING blocks too with `type_only`), and the
    function-level ones outside the command layer as 'module:line -> target'."""
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    inside: list[str] = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            chain, up = [], node
            while up in parents:
                up = parents[up]
                chain.append(up)
            checking = (
                isinstance(p, ast.If) and "TYPE_CHECKING" in ast.unparse(p.test) for p in chain
            )
            if not type_only and any(checking):
                continue
            targets = _target(node, module, path.name == "__init__.py")
            edges[module].update(targets)
            in_function = any(isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)) for p in chain)
            if targets and in_function and not module.startswith(COMMAND_LAYER):
                inside += [f"{module}:{node.lineno} -> {t}" for t in targets]
    return edges, inside


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            if component:
                out.append(sorted([v, *component]))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _package_edges(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    packages: dict[str, set[str]] = {}
    for a, targets in edges.items():
        packages.setdefault(_package(a), set()).update(
            _package(b) for b in targets if _package(b) != _package(a)
        )
    return packages


@pytest.mark.parametrize("type_only", [False, True], ids=["runtime", "type-only-too"])
def test_no_import_cycle_among_modules_or_packages(type_only):
    edges, _ = _imports(type_only)
    assert _cycles(edges) == []
    assert _cycles(_package_edges(edges)) == []


def test_each_package_imports_only_from_the_layers_below():
    layer = {package: i for i, names in enumerate(LAYERS) for package in names}
    packages = _package_edges(_imports(type_only=True)[0])
    assert set(packages) == set(layer), "place each package in LAYERS"
    up = [f"{a} -> {b}" for a, bs in packages.items() for b in bs if layer[b] >= layer[a]]
    assert up == []


def _heavy_imports(path: Path) -> list[str]:
    """The heavy third-party libraries a module imports outside functions and TYPE_CHECKING."""
    found = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.append(node.module or "")
    return [n for n in found if n.split(".")[0] in HEAVY]


def test_the_config_floor_imports_no_implementation_and_no_torch():
    """The floor's modules import only each other, and none of them torch (or another heavy
    library): a registry names its components' modules and imports one when a model or a
    search is built (t2.registry)."""
    edges, _ = _imports(type_only=True)
    outside = {f"{m} -> {t}" for m in CONFIG_FLOOR for t in edges[m] if t not in CONFIG_FLOOR}
    assert outside == set()
    heavy = {m: _heavy_imports(MODULES[m]) for m in CONFIG_FLOOR}
    assert {m: h for m, h in heavy.items() if h} == {}
    commands = [m for m in MODULES if m.startswith(COMMAND_LAYER)]
    below = {t for m in commands for t in _top_level(m) if not t.startswith(COMMAND_LAYER)}
    assert below <= CONFIG_FLOOR, "a verb imports its implementation inside run()"


def _top_level(module: str) -> set[str]:
    """The t2 modules a module imports outside its functions (and TYPE_CHECKING)."""
    path = MODULES[module]
    nodes = ast.parse(path.read_text(encoding="utf-8")).body
    imports = [n for n in nodes if isinstance(n, (ast.Import, ast.ImportFrom))]
    return {t for n in imports for t in _target(n, module, path.name == "__init__.py")}


def test_help_loads_no_torch():
    """`t2 --help` and every verb's --help build without importing torch (their speed is
    benchmarks/bench_cli.py's to measure)."""
    code = (
        "import sys; from t2.cli import build_parser; build_parser(); "
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_t2_modules_are_imported_at_the_top_outside_the_command_layer():
    assert _imports()[1] == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_modules_and_functions_stay_small(module):
    text = MODULES[module].read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_MODULE_LINES
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            assert node.end_lineno - node.lineno < MAX_FUNCTION_LINES, node.name


def test_the_checks_find_what_they_look_for(tmp_path):
    """The cycle finder finds a cycle, and the import reader sees an import in a function."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    code = ast.parse("def f():\n    from t2.config import Config\n")
    node = code.body[0].body[0]
    assert _target(node, "t2.x", False) == ["t2.config"]
