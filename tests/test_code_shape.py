"""The code's shape, checked with the suite so that CI fails on it: the import-linter contracts in
pyproject.toml (layers, forbidden imports, no cycles), ruff, mypy (its configuration in
pyproject.toml), no import cycle between packages (function-level imports included), and a top
level that holds only the layer packages."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "kubesched"


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    """A tool run on this checkout (not on whatever kubesched is installed)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False)


def test_import_linter_contracts_are_kept():
    result = _run(["-c", "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())",
                   "--no-cache"])
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_finds_nothing():
    result = _run(["-m", "ruff", "check", "--no-cache", "."])
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_finds_nothing(tmp_path):
    """The whole package, as ``[tool.mypy]`` configures it (strict where it says so); a fresh cache
    so that an earlier run's results cannot hide an error."""
    result = _run(["-m", "mypy", "--cache-dir", str(tmp_path / "mypy-cache")])
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    sys.path.insert(0, str(ROOT))
    try:
        return grimp.build_graph("kubesched", cache_dir=None)
    finally:
        sys.path.remove(str(ROOT))


def _child(package: str, module: str) -> str | None:
    """The child of ``package`` that ``module`` is or lies in."""
    if not module.startswith(package + "."):
        return None
    return f"{package}.{module[len(package) + 1:].split('.')[0]}"


def _cycles(nodes: set[str], edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected groups of more than one node (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(group)
    return groups


def package_cycles(graph: grimp.ImportGraph) -> list[str]:
    """For every package, the cycles among its children that involve a sub-package: a sub-package
    stands for everything below it, and every import counts, lazy and type-only ones too."""
    packages = {m for m in graph.modules if graph.find_children(m)}
    found = []
    for package in sorted(packages):
        edges: dict[str, set[str]] = {}
        for module in graph.modules:
            source = _child(package, module)
            if source is None:
                continue
            for imported in graph.find_modules_directly_imported_by(module):
                target = _child(package, imported)
                if target is not None and target != source:
                    edges.setdefault(source, set()).add(target)
        for group in _cycles(graph.find_children(package), edges):
            if group & packages:
                found.append(f"{package}: {' <-> '.join(sorted(group))}")
    return found


def test_no_import_cycle_between_packages(graph):
    assert package_cycles(graph) == []


@pytest.mark.parametrize(
    ("imports", "expected"),
    [
        ({"p.a.x": {"p.b.y"}, "p.b.y": {"p.a.z"}}, ["p: p.a <-> p.b"]),
        ({"p.a.x": {"p.b.y"}, "p.b.y": {"p.c"}}, []),
        ({"p.a.x": {"p.a.y"}, "p.a.y": {"p.a.x"}}, []),
    ],
    ids=["two packages importing each other", "imports in one direction", "modules of one package importing each other"],
)
def test_package_cycles_are_found_in_a_small_graph(imports, expected):
    graph = grimp.ImportGraph()
    for importer, targets in imports.items():
        for imported in targets:
            graph.add_import(importer=importer, imported=imported)
    for module in list(graph.modules):
        parts = module.split(".")
        for i in range(1, len(parts)):
            graph.add_module(".".join(parts[:i]))
    assert package_cycles(graph) == expected


def test_top_level_holds_only_the_layer_packages():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layered = {name.strip().removeprefix("kubesched.")
               for contract in config if contract["type"] == "layers" and "containers" not in contract
               for layer in contract["layers"] for name in layer.replace(":", "|").split("|")}
    modules = sorted(p.name for p in PACKAGE.glob("*.py"))
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert modules == ["__init__.py", "__main__.py"]
    assert packages == layered
