"""A warm start's early load of kept units: started only where units were kept and the
cache holds them, for the binaries a driver loads; one whose context fails, or whose keys
are not the lowering's, gives the session nothing (it then loads its own)."""

from __future__ import annotations

import pytest

from delegate_runtime.gpu.opencl import early_program
from delegate_runtime.gpu.opencl.cache import CacheKey, KernelCache
from delegate_runtime.gpu.opencl.runtime import DeviceInfo
from tests.conftest import require_module

require_module("pyopencl", "pyopencl (its ICD loader: the early load's C calls)")

pytestmark = pytest.mark.lowering_cache

FACTS = ("model-sha", "fp32")


def info(platform: str = "NVIDIA CUDA") -> DeviceInfo:
    return DeviceInfo(
        "k", platform, "NVIDIA H200", "NVIDIA", "580", "OpenCL 3.0", 132, 1, False, True
    )


def kept_units(tmp_path, n: int = 2) -> early_program.KeptUnits:
    """Units kept for FACTS, their entries in the cache (binaries no driver reads)."""
    cache = KernelCache(tmp_path)
    keys = tuple(CacheKey("tok", "NVIDIA H200", "580", "-O", f"{i:064x}") for i in range(n))
    for key in keys:
        cache.store(key, b"PTX")
    kept = early_program.KeptUnits(keys, "-O")
    early_program.keep(tmp_path, info(), FACTS, kept)
    return kept


def test_nothing_starts_where_no_units_were_kept_or_the_cache_lacks_one(tmp_path) -> None:
    assert early_program.start(tmp_path, info(), FACTS, lambda: None, 2) is None
    kept = kept_units(tmp_path)
    KernelCache(tmp_path).path(kept.keys[1]).unlink()
    assert early_program.start(tmp_path, info(), FACTS, lambda: None, 2) is None


def test_nothing_is_kept_or_started_where_the_driver_keeps_the_kernels(tmp_path) -> None:
    pocl = info("Portable Computing Language")
    early_program.keep(tmp_path, pocl, FACTS, early_program.KeptUnits((), ""))
    assert not (tmp_path / "lowering").exists()
    assert early_program.start(tmp_path, pocl, FACTS, lambda: None, 2) is None


def test_a_context_that_fails_gives_the_session_nothing(tmp_path) -> None:
    kept = kept_units(tmp_path)

    def opened():
        raise RuntimeError("clCreateContext failed")

    early = early_program.start(tmp_path, info(), FACTS, opened, 2)
    assert early is not None
    assert early.program_for(list(kept.keys), kept.options) is None and not early.used


def test_keys_the_lowering_does_not_need_are_dropped_unread(tmp_path) -> None:
    kept = kept_units(tmp_path)
    early = early_program.start(tmp_path, info(), FACTS, lambda: None, 2)
    assert early is not None
    assert early.program_for(list(kept.keys[:1]), kept.options) is None
    assert early.program_for(list(kept.keys), "-O -DOTHER") is None
    assert not early.used
