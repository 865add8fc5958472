"""Tests that run the GPU delegate with some switches changed (gpu/switches.py): every
session made while the test runs gets the switches of the environment with `changes`
applied, as `GpuSession(..., switches=...)` would, through the helpers that make the
sessions (check, check_against_litert, ...) without their passing them along."""

from __future__ import annotations

from typing import Any

from delegate_runtime.gpu.switches import Switches


def switched(monkeypatch: Any, **changes: Any) -> None:
    """Sessions made from now on in this test take `changes` (Switches field names)."""
    read = Switches.from_env.__func__  # type: ignore[attr-defined]

    def from_env(cls: type[Switches], environ: Any = None) -> Switches:
        return read(cls, environ).replace(**changes)

    Switches().replace(**changes)  # unknown names fail here, not at the first session
    monkeypatch.setattr(Switches, "from_env", classmethod(from_env))
