"""The CPUs this process may use: its affinity set, bounded by its cgroup's CPU quota.

`os.cpu_count()` counts the machine. A process confined to a few CPUs (taskset, a worker
agent's `--pin-cpus`) or in a container with a CPU quota (`docker run --cpus 2`) can use
fewer, and threads sized from the machine's count then queue for them. `usable_cpus()` is
the count the runtime sizes its threads from: the affinity set's size, bounded by the
tightest quota on the process's cgroup or an ancestor (v2 `cpu.max`: "quota period" or
"max period"; v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`, -1 for none), rounded down (a
quota of 1.5 CPUs runs one busy thread without being throttled), at least 1. It is measured
once per process; `forget()` measures again after the affinity changed.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Iterator
from pathlib import Path

#: Where the cgroup file systems are mounted.
CGROUP_ROOT = Path("/sys/fs/cgroup")
#: The process's cgroups ("id:controllers:path" a line; v2's line is "0::path").
PROC_CGROUP = Path("/proc/self/cgroup")
#: Where a cgroup v1 CPU controller is mounted, under CGROUP_ROOT.
V1_MOUNTS = ("cpu", "cpu,cpuacct", "cpuacct,cpu")


def affinity() -> frozenset[int]:
    """The CPUs the scheduler may run this process's calling thread on."""
    try:
        return frozenset(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return frozenset(range(os.cpu_count() or 1))


def quota_cpus(root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> float | None:
    """CPUs' worth of time per period that the tightest CPU quota on this process's cgroup
    (or one of its ancestors) allows; None when there is none."""
    quotas = (_quota_in(folder) for folder in _cgroup_folders(root, proc_cgroup))
    return min((q for q in quotas if q is not None), default=None)


def usable(cpus: int, quota: float | None) -> int:
    """`cpus` bounded by a quota of `quota` CPUs (rounded down), at least 1."""
    if quota is not None:
        cpus = min(cpus, math.floor(quota))
    return max(1, cpus)


@functools.cache
def usable_cpus(root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> int:
    """How many CPUs this process can keep busy at once (measured once; see the module)."""
    return usable(len(affinity()), quota_cpus(root, proc_cgroup))


def forget() -> None:
    """Measure again at the next `usable_cpus()` (after this process's affinity changed)."""
    usable_cpus.cache_clear()


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _ratio(quota: str, period: str) -> float | None:
    """quota / period in CPUs; None for no quota ("max", -1) or what does not parse."""
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def _quota_in(folder: Path) -> float | None:
    """The CPU quota set on one cgroup folder (v2 or v1), in CPUs."""
    v2 = _read(folder / "cpu.max")
    if v2 is not None:
        quota, _, period = v2.partition(" ")
        return _ratio(quota, period)
    quota, period = _read(folder / "cpu.cfs_quota_us"), _read(folder / "cpu.cfs_period_us")
    return _ratio(quota, period) if quota is not None and period is not None else None


def _cgroup_folders(root: Path, proc_cgroup: Path) -> Iterator[Path]:
    """The folders of this process's CPU cgroups and of their ancestors, up to each
    hierarchy's root (which a container's namespace makes its own cgroup)."""
    mine: list[tuple[Path, str]] = []  # (hierarchy's mount, path inside it)
    for line in (_read(proc_cgroup) or "").splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and not controllers:
            mine.append((root, path))
        elif "cpu" in controllers.split(","):
            mine.extend((root / m, path) for m in V1_MOUNTS)
    if not mine:  # no /proc: the mounts' roots alone
        mine = [(root, "/"), *((root / m, "/") for m in V1_MOUNTS)]
    for mount, path in mine:
        folder = mount / path.strip("/")
        for up in (folder, *folder.parents):
            yield up
            if up == mount:
                break
