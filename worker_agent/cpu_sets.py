"""How a worker agent shares its host's CPUs between its devices' consumer processes.

A GPU job's input copy runs on helper threads that spin (delegate_runtime/gpu/opencl/
host_copy.py), and the CPU reference on the same host measures its baseline on a core;
neither figure can be trusted if one takes the other's CPUs. Two layouts:

- shared (the default): every consumer may run on every usable CPU; each GPU consumer gets
  a helper budget (host_copy.BUDGET_ENV) so that the GPU consumers' callers and helpers and
  the CPU reference's interpreter thread fit in the usable CPUs together.
- pinned (`devicefarm worker --pin-cpus`, or PIN_ENV=1): the usable CPUs are split into
  disjoint sets: the CPU reference gets one core of its own (with its SMT siblings), the
  GPU consumers the rest in even shares, and phones and no-op devices (which wait on adb or
  sleep) share the GPU consumers' CPUs, never the reference's. Each consumer confines
  itself to its set at start (`pin`) and sizes its helpers from it. Off by default: on a
  small host disjoint sets halve what each consumer has (2 CPUs: one each), and a cgroup
  quota is shared time that pinning cannot divide.

Only the CPU reference and OpenCL consumers are counted: a phone's or no-op device's
consumer spends its job waiting.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from delegate_runtime import host_cpus
from delegate_runtime.errors import JobError

#: Pin each device's consumer to its own CPUs ("1"/"0"); `devicefarm worker --pin-cpus`.
PIN_ENV = "DEVICEFARM_PIN_CPUS"
#: Threads the CPU reference's interpreter keeps busy (single-threaded by definition; the
#: CLI sets BLAS to one thread).
REFERENCE_THREADS = 1
REFERENCE_KIND = "cpu"
GPU_KIND = "opencl"
#: Where Linux describes each CPU's core (topology/thread_siblings_list).
SYSFS_CPUS = Path("/sys/devices/system/cpu")


def pin_default() -> bool:
    """PIN_ENV as a switch (default off)."""
    raw = os.environ.get(PIN_ENV, "").strip().lower()
    if raw in ("", "0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    raise JobError(f"{PIN_ENV} must be 1 or 0, not {raw!r}")


@dataclass(frozen=True)
class ConsumerCpus:
    """Where one device's consumer may run and how many copy helpers it may start."""

    cpus: frozenset[int] | None  #: the set it pins itself to (None: not pinned)
    helper_budget: int | None  #: host_copy.BUDGET_ENV for it (None: left unset)


def helper_budget(usable: int, gpus: int, reference: bool) -> int:
    """Helpers each of `gpus` GPU consumers may start so that their callers, all their
    helpers and the CPU reference's threads (when `reference`) fit in `usable` CPUs."""
    if gpus <= 0:
        return 0
    spare = usable - gpus - (REFERENCE_THREADS if reference else 0)
    return max(0, spare // gpus)


def split(
    cpus: Collection[int], kinds: Mapping[str, str], cores: Mapping[int, int] | None = None
) -> dict[str, frozenset[int]]:
    """Disjoint CPU sets for the consumers of `kinds` (device key -> kind), from `cpus`:
    each CPU reference a whole core (the last ones; `cores` maps a CPU to its core, default
    its own), the GPU consumers the rest in even contiguous shares (whole cores where
    there are enough), any other consumer the GPU consumers' CPUs together (all the
    non-reference CPUs when there is no GPU). JobError when a consumer would get none."""
    cores = cores or {}
    by_core: dict[int, list[int]] = {}
    for cpu in sorted(cpus):
        by_core.setdefault(cores.get(cpu, cpu), []).append(cpu)
    groups = [by_core[c] for c in sorted(by_core)]
    refs = sorted(k for k, kind in kinds.items() if kind == REFERENCE_KIND)
    gpus = sorted(k for k, kind in kinds.items() if kind == GPU_KIND)
    others = sorted(k for k in kinds if k not in refs and k not in gpus)
    if len(groups) < len(refs):
        raise JobError(_too_few(cpus, len(refs), len(gpus)))
    sets: dict[str, frozenset[int]] = {}
    for key in refs:  # NOTE: the last cores: CPU 0 takes more of the kernel's interrupts
        sets[key] = frozenset(groups.pop())
    rest = groups if len(groups) >= len(gpus) else [[c] for g in groups for c in g]
    if len(rest) < len(gpus) or (others and not rest):
        raise JobError(_too_few(cpus, len(refs), len(gpus)))
    for i, key in enumerate(gpus):
        share = rest[i * len(rest) // len(gpus) : (i + 1) * len(rest) // len(gpus)]
        sets[key] = frozenset(c for g in share for c in g)
    shared = frozenset(c for g in rest for c in g)
    for key in others:
        sets[key] = shared
    return sets


def _too_few(cpus: Collection[int], refs: int, gpus: int) -> str:
    return (
        f"--pin-cpus: {len(cpus)} usable CPU(s) ({format_list(cpus)}) cannot give "
        f"{refs} CPU reference(s) a core of its own and {gpus} GPU consumer(s) a CPU each; "
        "run without --pin-cpus (the consumers then share the CPUs within a helper budget)"
    )


def layout(
    kinds: Mapping[str, str],
    cpus: Collection[int],
    usable: int,
    pin: bool,
    cores: Mapping[int, int] | None = None,
) -> dict[str, ConsumerCpus]:
    """Each consumer's CPUs and helper budget (see the module): pinned sets from `cpus`
    when `pin`, else the shared CPUs (`usable` of them) with a budget for GPU consumers."""
    if pin:
        return {k: ConsumerCpus(s, None) for k, s in split(cpus, kinds, cores).items()}
    gpus = sum(1 for kind in kinds.values() if kind == GPU_KIND)
    budget = helper_budget(usable, gpus, REFERENCE_KIND in kinds.values())
    return {
        k: ConsumerCpus(None, budget if kind == GPU_KIND else None) for k, kind in kinds.items()
    }


def host_layout(kinds: Mapping[str, str], pin: bool) -> dict[str, ConsumerCpus]:
    """`layout` for this process's usable CPUs and this machine's cores."""
    cpus = host_cpus.affinity()
    return layout(kinds, cpus, host_cpus.usable_cpus(), pin, cores_of(cpus))


def cores_of(cpus: Iterable[int], sysfs: Path = SYSFS_CPUS) -> dict[int, int]:
    """CPU -> its core, named by the lowest of its SMT siblings (itself where unknown)."""
    cores = {}
    for cpu in cpus:
        try:
            siblings = parse_list((sysfs / f"cpu{cpu}/topology/thread_siblings_list").read_text())
        except (OSError, ValueError):
            siblings = frozenset()
        cores[cpu] = min(siblings, default=cpu)
    return cores


def pin(cpus: Collection[int]) -> None:
    """Confine this process to `cpus`: every thread it has now and all it starts later."""
    try:
        threads = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        threads = [0]
    for tid in threads:
        with contextlib.suppress(ProcessLookupError):  # the thread ended meanwhile
            os.sched_setaffinity(tid, cpus)
    host_cpus.forget()


def parse_list(text: str) -> frozenset[int]:
    """`0-3,8` (Linux's CPU list format, as in Cpus_allowed_list) -> {0, 1, 2, 3, 8}."""
    out: set[int] = set()
    for part in text.strip().split(","):
        if not part.strip():
            continue
        first, _, last = part.partition("-")
        out.update(range(int(first), int(last or first) + 1))
    return frozenset(out)


def format_list(cpus: Iterable[int]) -> str:
    """{0, 1, 2, 3, 8} -> `0-3,8`."""
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs)
