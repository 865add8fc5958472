"""Resident program builders for the GPUs this agent serves (delegate_runtime's
gpu/opencl/build_pool.py): a new model's first job builds its kernels on builders that
are already running (four with their contexts held, the others making theirs again
when the job comes), instead of starting processes (issue 39, cold start).

Started for each OpenCL device whose driver compiles one program at a time per process
(NVIDIA), before the first canary, on the kernel cache the jobs use; stopped with the
agent (and each builder exits by itself when the agent is gone). DEVICEFARM_BUILD_POOL
sets the builders per device (0: none; default build_pool.default_builders: one per
usable CPU but one, 15 at most with the switches' defaults). The builders first build
the first tier's generic kernels the cache lacks (tier_warm_up.py; the sessions' own jobs
go first; DEVICEFARM_WARM_TIER=0 skips it), so that every new model on the host starts on
them: about 50 s once per host and driver on an H100. A pool that fails to start is
reported and left out: sessions then start their own build workers, as without it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from .devices import DeviceInfo

POOL_ENV = "DEVICEFARM_BUILD_POOL"
#: 0: the builders do not build the first tier at their start (tier_warm_up.py). On by
#: default: on an H100 its 186 units took 49-52 s once, after which a new model's cold start
#: was 0.12-0.20x LiteRT's GPU against 2.07x without (docs/benchmarks.md).
WARM_TIER_ENV = "DEVICEFARM_WARM_TIER"


def warm_tier(environ: dict[str, str] | None = None) -> bool:
    """Whether the builders warm the first tier up: DEVICEFARM_WARM_TIER (default 1)."""
    raw = (environ if environ is not None else os.environ).get(WARM_TIER_ENV, "").strip()
    if raw not in ("", "0", "1"):
        raise ValueError(f"{WARM_TIER_ENV}={raw!r}: expected 0 or 1")
    return raw != "0"


def builders_wanted(environ: dict[str, str] | None = None) -> int:
    """Builders per device: DEVICEFARM_BUILD_POOL, else build_pool.default_builders()."""
    from delegate_runtime.gpu.opencl.build_pool import default_builders

    raw = (environ if environ is not None else os.environ).get(POOL_ENV, "").strip()
    if raw:
        try:
            return max(int(raw), 0)
        except ValueError:
            raise ValueError(f"{POOL_ENV}={raw!r}: expected a number of builders") from None
    return default_builders()


def wants_pool(device: DeviceInfo) -> bool:
    from delegate_runtime.gpu.opencl.build_workers import ONE_BUILD_PER_PROCESS

    return device.kind == "opencl" and device.facts.get("platform") in ONE_BUILD_PER_PROCESS


class BuildPools:
    """The resident builders this agent started, per device key."""

    def __init__(self, say: Callable[[str], None]):
        self.say = say
        self.procs: dict[str, list[Any]] = {}

    def ensure(self, devices: Iterable[DeviceInfo]) -> None:
        """Start the builders of each device that wants them and has none yet."""
        for device in devices:
            if device.key in self.procs or not wants_pool(device):
                continue
            self.procs[device.key] = []
            count = builders_wanted()
            if count:
                self._start(device, count)

    def _start(self, device: DeviceInfo, count: int) -> None:
        from delegate_runtime.gpu.opencl.build_pool import start_pool
        from delegate_runtime.gpu.opencl.cache import default_cache_dir

        try:
            procs = start_pool(
                device.facts["opencl_spec"], default_cache_dir(), count, warm_tier=warm_tier()
            )
        except (RuntimeError, OSError, KeyError) as exc:
            self.say(f"{device.key}: no resident program builders ({exc})")
            return
        self.procs[device.key] = procs
        self.say(f"{device.key}: {count} resident program builders")

    def stop(self) -> None:
        from delegate_runtime.gpu.opencl.build_pool import stop_pool

        for procs in self.procs.values():
            stop_pool(procs)
        self.procs.clear()
