"""The package's shape, measured from its source: no import cycle among t2's modules or its
packages (imports inside functions count), no function-level import of a t2 module outside
the command layer, modules under 300 lines and functions under 60."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "t2"
COMMAND_LAYER = ("t2.cli", "t2.commands")  # verbs import lazily so `t2 --help` stays quick
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 300, 60


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


def _imports() -> tuple[dict[str, set[str]], list[str]]:
    """Each module's t2 imports (TYPE_CHECKING blocks aside), and the function-level ones
    outside the command layer as 'module:line -> target'."""
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
            if any(isinstance(p, ast.If) and "TYPE_CHECKING" in ast.unparse(p.test) for p in chain):
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


def test_no_import_cycle_among_modules_or_packages():
    edges, _ = _imports()
    assert _cycles(edges) == []
    packages: dict[str, set[str]] = {}
    for a, targets in edges.items():
        packages.setdefault(_package(a), set()).update(
            _package(b) for b in targets if _package(b) != _package(a)
        )
    assert _cycles(packages) == []


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
