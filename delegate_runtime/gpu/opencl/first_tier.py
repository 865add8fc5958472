"""A cold session's first tier: its launches on the generic kernels while its own program
builds, as a JIT runs a method interpreted until its compiled code is ready.

A model's own program (specialize.py: a copy of a kernel per launch, persistent kernels)
is what makes its inference fast and its cold start slow: on an H100 the EfficientNet
family's 28-51 units took 3-5 s on 15 woken builders, 2.1-2.5x LiteRT's GPU's whole start
(docs/benchmarks.md). The kernels those copies are made from are few (11 for
MobileNetV3Large) and the same for every model: each is a unit of its own
(program_units.kernel_units) cut from the whole library (`tier_source`: every op's kernel
files, so a unit's text, and its cache key, is the same whatever the model's other ops;
cut from the model's own files, a rare op's file changed every unit's helpers), so that a
host builds each once for all its models: its resident builders build them all when they
start (tier_warm_up.py). A session whose own program the kernel cache does not hold
whole starts on them where the host built all of them before (`wanted`), its launches
renamed back to the kernels their copies were made from, every argument passed and no
persistent runs (a copy computes what its generic kernel computes for its launch), and
builds its own program in a thread; it swaps its own program in at the first invoke after the build, or
when asked (GpuSession.settle: a benchmark asks before it times anything past the first
inference). A session that waited for its own program instead leaves the tier's units
to the host's resident builders (`leave_for_builders`), so the models after it start on
them.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

from . import build_pool, build_workers
from .cache import KernelCache
from .launch import Lowered, LoweredPartition
from .program import program_source
from .program_units import kernel_units
from .specialize import generic_name

#: The kernel cache's token of the tier's units: the program every model shares.
TOKEN = "program"


@functools.cache
def tier_source() -> str:
    """The program the tier's units are cut from: every op's kernel files (376 kB, its
    helpers 113 kB against 109 kB for a float CNN's own files)."""
    return program_source()


def generic_parts(parts: list[LoweredPartition]) -> list[LoweredPartition]:
    """`parts` (a specialized program's) with each launch on the generic kernel its copy
    was made from, taking every argument, and no persistent runs."""
    out = []
    for part in parts:
        lowered = part.lowered
        launches = [
            replace(launch, kernel=generic_name(launch.kernel), copy_args=None)
            for launch in lowered.launches
        ]
        out.append(replace(part, lowered=Lowered(launches, lowered.consts, lowered.alias)))
    return out


def generic_units(parts: list[LoweredPartition]) -> list[str]:
    """A unit per generic kernel `parts` launch (kernel_units of `tier_source`)."""
    names = {launch.kernel for part in parts for launch in part.lowered.launches}
    return kernel_units(tier_source(), names)


def wanted(forced: bool | None, on: bool, is_gpu: bool, cached: int, units: int) -> bool:
    """Whether a session whose own program the cache lacks starts on the first tier:
    where the switch was set (`forced`), as it says; at its default (`on`), on a GPU whose
    kernel cache holds every one of the tier's `units` (`cached`): a host that built them
    for earlier models. A tier unit still to build costs more than the model's own (each
    generic kernel with every argument at run time: an H100, EfficientNetB0 on an empty
    cache, 4.2 s against 3.1 s; EfficientNetB0__int8 after a float model, whose tier
    lacked the quantized kernels, 6.2-6.8 s against 4.9-5.7 with no tier), so a session
    that would build any waits for its own program and leaves the tier's missing units to
    the host's builders (`leave_for_builders`) for the models after it."""
    if forced is not None:
        return forced
    return on and is_gpu and units > 0 and cached == units


def leave_for_builders(
    device: Any, cache: KernelCache, missing: list[str], token: str, options: str
) -> int:
    """Post the tier's units the cache lacks (`missing`) to the host's resident builders
    (build_pool.py), without waiting: they build them after the session's own program, for
    the models after it. The units posted (0 where no builder runs)."""
    spec = build_workers.device_spec(device)
    spool = build_pool.spool_dir(cache.dir, spec)
    if not missing or not build_pool.live_builders(spool):
        return 0
    job = build_workers.unit_job(spec, cache, token, options, missing)
    build_pool.post_job(spool, {**job, "unattended": True})
    return len(missing)
