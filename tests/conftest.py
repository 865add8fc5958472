"""Shared test configuration: tiers by folder; missing services skip locally, fail in CI."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require(condition: bool, what: str) -> None:
    """Skip when `what` is missing locally; fail in CI, where everything must be present."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"{what} is required in CI but missing")
    pytest.skip(f"{what} is not available here")


def require_module(name: str, what: str = "") -> ModuleType:
    """Import `name` for a whole test module: skipped locally when it is missing, a
    collection error in CI."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        if IN_CI:
            pytest.fail(f"{what or name} is required in CI but missing ({exc})", pytrace=False)
        pytest.skip(f"{what or name} is not available here", allow_module_level=True)


def _drivers_cache_where_the_farms_is() -> None:
    """The drivers' kernel caches where a session with the default cache puts them, set
    before any test's session can point them into its own temporary folder (a process
    reads them once), so that they stay warm from one run to the next."""
    from delegate_runtime.gpu.opencl.cache import default_cache_dir, point_driver_cache

    point_driver_cache(default_cache_dir())


_drivers_cache_where_the_farms_is()


@pytest.fixture(autouse=True)
def _no_kept_lowering(request, monkeypatch) -> None:
    """Sessions neither keep nor read their lowering in the kernel cache
    (delegate_runtime/gpu/opencl/lowering_cache.py) unless a test is marked
    `lowering_cache`: tests patch the lowering's own code (Lowerer, model_program, module
    constants), and a lowering an earlier test or run kept would stand in for the patch."""
    if request.node.get_closest_marker("lowering_cache"):
        return
    from delegate_runtime.gpu.opencl import lowering_cache

    monkeypatch.setattr(lowering_cache, "load", lambda cache, key: None)
    monkeypatch.setattr(lowering_cache, "store", lambda cache, key, lowering: None)


@pytest.fixture(scope="session", autouse=True)
def _farm_home_of_the_tests(tmp_path_factory) -> None:
    """A test that names no farm home gets one of this session's (each xdist worker its
    own), never the user's data directory."""
    if not os.environ.get("DEVICEFARM_HOME"):
        os.environ["DEVICEFARM_HOME"] = str(tmp_path_factory.mktemp("farm-home"))
