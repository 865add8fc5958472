"""A host's first tier built before a model asks for it: the resident builders' first job.

A session starts on the first tier (first_tier.py) only where the kernel cache holds every
generic kernel it launches, so a host's first models waited for their own programs (the
EfficientNet family on an H200 with every cache empty: 4.2-6.1 s, 1.7-3.0x LiteRT's GPU
start). The generic kernels are few (the library's 62) and each one's unit is the same
text for every model (first_tier.tier_source), so the builders build them all once per
device and driver, under each option set a GPU session builds with (float32 storage;
half storage, with the weights in float32 or in half), as unattended jobs posted when
they start, built by the builders that keep their contexts (4 of 15 by default), the
sessions' own jobs first (build_pool.serve); a later start finds them cached and posts
nothing. The first builder of a pool started with the warm-up posts them
(builder_process.py).
"""

from __future__ import annotations

from pathlib import Path

from ..switches import Switches
from .build_pool import waiting_first
from .build_workers import unit_job
from .cache import KernelCache
from .cl_source import read_source
from .first_tier import TOKEN, tier_source
from .program import build_options, program_key
from .program_units import kernel_units
from .runtime import DeviceInfo
from .unit_claims import not_done


def option_sets(info: DeviceInfo) -> list[str]:
    """The build options a GPU session's program may have on `info` (program.build_options
    of each precision and weights' type)."""
    return [
        build_options("fp32", info),
        build_options("fp16", info, half_weights=False),
        build_options("fp16", info, half_weights=True),
    ]


def wanted(info: DeviceInfo, switches: Switches) -> bool:
    """Whether builders on `info` warm the tier up: where sessions start on it (its switch
    set on, or at its default on a GPU)."""
    forced = switches.explicit("first_tier")
    return forced if forced is not None else switches.first_tier and info.is_gpu


def jobs(info: DeviceInfo, cache: KernelCache, spec: str) -> list[dict]:
    """A job per option set of the tier's units that `cache` lacks (none where it holds
    them all), for the builders of device `spec`."""
    source = tier_source()
    _, _, spans = read_source(source)
    units = kernel_units(source, set(spans))
    out = []
    for options in option_sets(info):
        missing = [u for u in units if not cache.holds(program_key(info, TOKEN, u, options))]
        if missing:
            out.append({**unit_job(spec, cache, TOKEN, options, missing), "unattended": True})
    return out


def units_left(spool: Path) -> int:
    """Units of `spool`'s unattended jobs neither built nor failed yet."""
    return sum(
        not_done(job, job_file)
        for job_file, job in waiting_first(spool / "jobs")
        if job.get("unattended")
    )
