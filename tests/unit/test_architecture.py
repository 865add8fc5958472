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


def module_edges(root: Path, package: str) -> dict[tuple[str, str], list[str]]:
    """(importer, imported) between the modules of `package` (a package is its __init__),
    relative imports resolved, imports of a module's own parent packages left out."""
    names = {}
    for path in (root / package).rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def known(name: str) -> str:
        while name not in names and "." in name:
            name = name.rsplit(".", 1)[0]
        return name if name in names else ""

    edges: dict[tuple[str, str], list[str]] = {}
    for module, path in names.items():
        here = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = here.split(".")[: len(here.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                wanted = [f"{base}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                wanted = [a.name for a in node.names]
            else:
                continue
            for target in filter(None, map(known, wanted)):
                if target != module and not module.startswith(target + "."):
                    edges.setdefault((module, target), []).append(f"{path.name}:{node.lineno}")
    return edges


def by_name(root: Path, package: str, names: str) -> dict[tuple[str, str], list[str]]:
    """The edges of a package whose __init__ imports its modules by name with
    `import_module` over the tuple `names` (the records' registration order)."""
    init = root / package.replace(".", "/") / "__init__.py"
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == names:
            listed = ast.literal_eval(node.value)
            return {(package, f"{package}.{m}"): [f"__init__.py:{node.lineno}"] for m in listed}
    raise AssertionError(f"{init} has no {names}")


RECORDS = "delegate_runtime.gpu.opencl.records"
DELEGATE_MODULES = module_edges(REPO, "delegate_runtime") | by_name(REPO, RECORDS, "OP_MODULES")


def test_the_delegates_modules_import_no_cycle() -> None:
    """Every import, those inside functions included: no module of the delegate runtime
    reaches itself (records/ and opencl/ once formed an 11-file cycle)."""
    assert find_cycle(DELEGATE_MODULES) == []


def test_the_delegates_packages_import_no_cycle() -> None:
    """Between the runtime's packages (gpu, gpu.opencl, its records and fusions, ops,
    tools, commands), leaving out a package's imports of the packages that hold it."""

    def package(module: str) -> str:
        return module if module.count(".") == 0 or _is_package(module) else module.rsplit(".", 1)[0]

    between = {
        (package(a), package(b)): where
        for (a, b), where in DELEGATE_MODULES.items()
        if package(a) != package(b) and not package(a).startswith(package(b) + ".")
    }
    assert find_cycle(between) == []


def _is_package(module: str) -> bool:
    return (REPO / module.replace(".", "/") / "__init__.py").is_file()


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
