"""The package map of docs/architecture.md, checked from the source: every import statement
of every top-level package (imports inside function bodies included) goes down the layers,
and the graph between packages has no cycle."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: package -> the project packages it may import. Everything else is a layering error.
ALLOWED: dict[str, frozenset[str]] = {
    "delegate_runtime": frozenset(),
    "farm_core": frozenset({"delegate_runtime"}),
    "orchestrator": frozenset({"delegate_runtime", "farm_core"}),
    "worker_agent": frozenset({"delegate_runtime", "farm_core"}),
    "dashboard": frozenset({"delegate_runtime", "farm_core", "orchestrator"}),
    "api": frozenset({"delegate_runtime", "farm_core", "orchestrator"}),
    "labkit": frozenset({"delegate_runtime", "farm_core", "orchestrator"}),
    "devicefarm": frozenset(
        {"delegate_runtime", "farm_core", "orchestrator", "worker_agent", "dashboard", "api"}
    ),
}


def top_level_packages(root: Path) -> list[str]:
    return sorted(p.parent.name for p in root.glob("*/__init__.py"))


def imported_modules(path: Path, package: str) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) of every import statement in a file, at any depth."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                yield node.lineno, node.module or ""
            else:  # relative: stays inside the file's own top-level package
                yield node.lineno, package


def package_edges(root: Path, packages: list[str]) -> dict[tuple[str, str], list[str]]:
    """(importer, imported) between project packages -> where ("file:line") it happens."""
    edges: dict[tuple[str, str], list[str]] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            for line, module in imported_modules(path, package):
                target = module.split(".")[0]
                if target in packages and target != package:
                    where = f"{path.relative_to(root)}:{line}"
                    edges.setdefault((package, target), []).append(where)
    return edges


def find_cycle(edges: Mapping[tuple[str, str], object]) -> list[str]:
    """One cycle of the graph as a path [a, b, ..., a], or [] when there is none."""
    graph: dict[str, list[str]] = {}
    for a, b in edges:
        graph.setdefault(a, []).append(b)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, [])):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return []


EDGES = package_edges(REPO, top_level_packages(REPO))


def test_every_top_level_package_has_a_place_in_the_map() -> None:
    assert set(top_level_packages(REPO)) == set(ALLOWED)


def test_the_package_graph_has_no_cycle() -> None:
    assert find_cycle(EDGES) == []


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_go_down_the_layers(package: str) -> None:
    wrong = {
        f"{package} -> {target}": where
        for (source, target), where in EDGES.items()
        if source == package and target not in ALLOWED[package]
    }
    assert wrong == {}


def test_benchmarks_never_import_the_test_suite() -> None:
    """bench/ imports product packages (labkit for its lab pieces), never `tests`."""
    wrong = [
        f"{path.relative_to(REPO)}:{line}"
        for path in sorted((REPO / "bench").rglob("*.py"))
        for line, module in imported_modules(path, "bench")
        if module.split(".")[0] == "tests"
    ]
    assert wrong == []


def test_the_checker_sees_imports_inside_functions_and_finds_cycles(tmp_path: Path) -> None:
    for name, body in {
        "low": "def f():\n    from high.mod import x\n",
        "high": "import low\n",
    }.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
        (tmp_path / name / "mod.py").write_text(body)
    edges = package_edges(tmp_path, top_level_packages(tmp_path))
    assert set(edges) == {("low", "high"), ("high", "low")}
    assert edges[("low", "high")] == ["low/mod.py:2"]
    assert find_cycle(edges) in (["high", "low", "high"], ["low", "high", "low"])
