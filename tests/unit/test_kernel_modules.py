"""Every kernel module listed in ops/_all.py imports; a missing one is an error, not a gap."""

from __future__ import annotations

import pytest

from delegate_runtime.ops import _all


def test_a_missing_kernel_module_raises() -> None:
    with pytest.raises(ModuleNotFoundError, match="no_such_family"):
        _all.import_kernel_modules(("no_such_family",))


def test_a_broken_kernel_module_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(name: str) -> None:
        raise ImportError(f"cannot import {name}")

    monkeypatch.setattr(_all.importlib, "import_module", broken)
    with pytest.raises(ImportError, match="mediapipe"):
        _all.import_kernel_modules(("mediapipe",))


@pytest.mark.parametrize("name", _all.KERNEL_MODULES)
def test_each_listed_module_imports(name: str) -> None:
    _all.import_kernel_modules((name,))
