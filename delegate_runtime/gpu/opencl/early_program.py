"""A warm start's program loaded as soon as its context is made, beside the lowering.

A warm start loaded its program's cached units only once the lowering had said which
they were: NASNetMobile's 72 units took 88-100 ms on an H100 after a lowering of 153-238
ms, while the driver's context had been ready for a while (docs/benchmarks.md). A session
now keeps, beside its lowering (lowering_cache.py), the cache keys of its program's units
and their build options; the next session of the same model, switches and device reads
them first and loads those units in a thread that waits for the context, while its own
thread reads (or makes) the lowering. The lowering then says which units it needs: where
they are the kept ones, the early load is the session's program; else it is dropped and
the program loaded as before. Only where the cache holds the binaries the driver loads
(not PoCL's, whose kernels its own cache keeps: program.DRIVER_CACHED).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import lowering_cache
from .cache import CacheKey, KernelCache
from .capi import opencl_library
from .program import RawBuild, driver_caches_kernels, finish_build, from_binary
from .program_units import ProgramSet
from .runtime import DeviceInfo

#: The kept units' entries: their token in the lowering's folder.
TOKEN = "units"


@dataclass(frozen=True)
class KeptUnits:
    """A program's units as the kernel cache keys them, and their build options."""

    keys: tuple[CacheKey, ...]
    options: str


@dataclass
class EarlyProgram:
    """The kept units, and their loading (None where one failed)."""

    kept: KeptUnits
    loading: Future[ProgramSet | None]
    used: bool = False  #: it was the session's program

    def program_for(self, keys: list[CacheKey], options: str) -> ProgramSet | None:
        """The loaded program where `keys` and `options` (what the lowering needs) are the
        kept ones and every unit loaded; else None (then the session loads its own)."""
        if tuple(keys) != self.kept.keys or options != self.kept.options:
            return None
        programs = self.loading.result()
        self.used = programs is not None
        return programs


def _entry_key(info: DeviceInfo, facts: tuple[Any, ...]) -> CacheKey:
    return lowering_cache.lowering_key(info.name, info.driver_version, facts, token=TOKEN)


def _cache(cache_dir: Path) -> KernelCache:
    return KernelCache(cache_dir / lowering_cache.SUBDIR)


def keep(cache_dir: Path, info: DeviceInfo, facts: tuple[Any, ...], kept: KeptUnits) -> None:
    """Keep `kept` for the next session with these `facts` (the lowering's and the token's),
    where a session could load them early (`start`)."""
    if not driver_caches_kernels(info):
        lowering_cache.store(_cache(cache_dir), _entry_key(info, facts), kept)


def start(
    cache_dir: Path,
    info: DeviceInfo,
    facts: tuple[Any, ...],
    opened: Callable[[], Any],
    jobs: int,
) -> EarlyProgram | None:
    """The units kept for `facts` loading in a thread once `opened()` (the session's
    OpenedDevice) returns; None where none are kept, the cache lacks one of them, or the
    driver's binaries are not what the cache holds."""
    if driver_caches_kernels(info) or opencl_library() is None:
        return None
    kept = lowering_cache.load(_cache(cache_dir), _entry_key(info, facts))
    if not isinstance(kept, KeptUnits) or not kept.keys:
        return None
    cache = KernelCache(cache_dir)
    if not cache.holds_all(kept.keys):
        return None

    def load() -> ProgramSet | None:
        try:
            device = opened()
            begun = time.perf_counter()  # the load's own time, as a session's program phase
            programs = load_units(device.ctx, device.device, cache, kept, jobs)
        except Exception:  # noqa: BLE001 - the session's own steps meet and report it
            return None
        if programs is not None:
            programs.made_ms = (time.perf_counter() - begun) * 1e3
        return programs

    pool = ThreadPoolExecutor(1, thread_name_prefix="opencl-early-program")
    try:
        return EarlyProgram(kept, pool.submit(load))
    finally:
        pool.shutdown(wait=False)


def load_units(
    ctx: Any, device: Any, cache: KernelCache, kept: KeptUnits, jobs: int
) -> ProgramSet | None:
    """`kept`'s units loaded from their binaries, `jobs` at a time; None where an entry is
    gone or the driver refuses one (removed: the session's own load then builds it)."""
    lib = opencl_library()

    def raw(key: CacheKey) -> RawBuild | None:
        binary = cache.load(key)
        return from_binary(lib, ctx, device, cache, key, binary, kept.options) if binary else None

    with ThreadPoolExecutor(max(1, min(jobs, len(kept.keys)))) as pool:
        raws = list(pool.map(raw, kept.keys))
    if any(r is None for r in raws):
        return None
    return ProgramSet([finish_build(r, device, kept.options) for r in raws])
