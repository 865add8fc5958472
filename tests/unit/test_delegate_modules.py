"""The delegate's own module graph, checked from the source: no module of
`delegate_runtime` reaches itself through imports (at any depth, inside functions and under
TYPE_CHECKING included), so each can be read, tested and changed from the bottom up. The
records of the GPU ops sit inside the OpenCL backend and see the lowering only through
`opencl/lowering_api.py`."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.unit.test_architecture import REPO, find_cycle

PACKAGE = "delegate_runtime"


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every module of `package` (a package by its
    __init__)."""
    names = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def module_edges(root: Path, package: str) -> dict[tuple[str, str], list[str]]:
    """(importer, imported) between modules of `package` -> where ("file:line")."""
    modules = module_names(root, package)
    edges: dict[tuple[str, str], list[str]] = {}
    for name, path in modules.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = here[: len(here) - (node.level - 1)]
                    base = ".".join(up + ([base] if base else []))
                # `from pkg import mod` imports the module where one is so named
                targets = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                    for a in node.names
                ]
            for target in targets:
                if target in modules and target != name:
                    where = f"{path.relative_to(root)}:{node.lineno}"
                    edges.setdefault((name, target), []).append(where)
    return edges


def test_the_delegates_modules_import_each_other_without_a_cycle() -> None:
    assert find_cycle(module_edges(REPO, PACKAGE)) == []


def test_the_records_reach_the_lowering_only_through_its_interface() -> None:
    edges = module_edges(REPO, PACKAGE)
    records = f"{PACKAGE}.gpu.opencl.records"
    wrong = [a for a, b in edges if a.startswith(records) and b == f"{PACKAGE}.gpu.opencl.lowering"]
    assert wrong == []


def test_the_checker_resolves_relative_imports_and_finds_cycles(tmp_path: Path) -> None:
    pkg = tmp_path / "p"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .sub import b\n"
    )
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..a import x\n")
    edges = module_edges(tmp_path, "p")
    assert edges == {("p.a", "p.sub.b"): ["p/a.py:3"], ("p.sub.b", "p.a"): ["p/sub/b.py:2"]}
    assert find_cycle(edges) in (["p.a", "p.sub.b", "p.a"], ["p.sub.b", "p.a", "p.sub.b"])
