"""A model's program built as several programs at once, one thread each.

NVIDIA's OpenCL compiler builds a program on one CPU core: a model's own program
(specialize.py: a copy per GEMM and depthwise launch, persistent kernels) took 3-26 s to
build cold on an H200, nearly all of a cold start. Split into units that each hold every
helper and macro of the program but only a share of its kernels, the units build at once
on the host's cores (in threads: clBuildProgram through the C API lets other threads run;
in processes where the driver compiles one program at a time, build_workers.py), and each
unit is a kernel-cache entry of its own. Each persistent kernel (persistent.py) is a unit
of its own with only the layer functions it calls: they are the program's largest text
(18 s of pose_landmark_full's 32 s, one after another, on an H200).

`ProgramSet.kernel(name)` finds a kernel in whichever unit holds it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ...host_cpus import usable_cpus
from ..switches import DEFAULTS, Switches
from . import build_workers
from .cache import KernelCache
from .capi import opencl_library
from .cl_source import read_source
from .program import (
    BuiltProgram,
    build_options,
    build_program,
    build_raw,
    finish_build,
    program_key,
)
from .raw_kernel import RawKernel
from .runtime import DeviceInfo, guarded


def split_units(source: str, count: int) -> list[str]:
    """`source` as at most `count` sources, each holding all of its text but its kernels,
    and a share of the kernels (balanced by their text's length); every kernel in one."""
    _, _, spans = read_source(source)
    count = min(count, len(spans))
    if count <= 1:
        return [source]
    ordered = sorted(spans.items(), key=lambda item: item[1].start)
    shares: list[set[str]] = [set() for _ in range(count)]
    loads = [0] * count
    for name, kt in sorted(ordered, key=lambda item: item[1].start - item[1].end):
        least = loads.index(min(loads))
        shares[least].add(name)
        loads[least] += kt.end - kt.start
    return [keeping(source, ordered, share) for share in shares]


def keeping(source: str, ordered: list[tuple[str, Any]], names: set[str]) -> str:
    """`source` with the kernels of `ordered` (name, span) not in `names` removed."""
    parts, at = [], 0
    for name, kt in ordered:
        parts.append(source[at : kt.start])
        if name in names:
            parts.append(source[kt.start : kt.end])
        at = kt.end
    parts.append(source[at:])
    return "".join(parts)


def kernel_units(source: str, names: set[str]) -> list[str]:
    """`source` as one unit per kernel of `names` (in the order they stand), each holding
    all of its helpers and macros: a unit's text, and so its cache key, is the same for
    every model whose program `source` is, so models share what one of them built."""
    _, _, spans = read_source(source)
    missing = names - spans.keys()
    if missing:
        raise KeyError(f"no kernel {sorted(missing)} in the program source")
    ordered = sorted(spans.items(), key=lambda item: item[1].start)
    return [keeping(source, ordered, {name}) for name, _ in ordered if name in names]


def without_kernels(source: str) -> str:
    """`source`'s helpers and macros: every kernel removed."""
    _, _, spans = read_source(source)
    return keeping(source, sorted(spans.items(), key=lambda item: item[1].start), set())


@dataclass
class ProgramSet:
    """The units of one program, built; `prebuilt` of them just before by worker processes
    and the session (build_workers.py), which the session then loaded from the cache."""

    built: list[BuiltProgram]
    prebuilt: int = 0
    workers: int = 0
    resident: int = 0  #: the host's resident builders that took part (build_pool.py)
    made_ms: float = 0.0  #: its loading's own time where it ran beside the uploads

    def __post_init__(self) -> None:
        import pyopencl as cl

        self._owner: dict[str, Any] = {}
        self._entries: dict[str, str | None] = {}
        for b in self.built:
            names = b.program.get_info(cl.program_info.KERNEL_NAMES)
            for name in filter(None, names.split(";")):
                self._owner.setdefault(name, b.program)
                self._entries.setdefault(name, b.cache_path)

    @property
    def misses(self) -> int:
        """Units that were not in the kernel cache when the session began: those the
        workers were given (any the session built again after a worker failed are among
        them), else those the session built."""
        return self.prebuilt or sum(not b.from_cache for b in self.built)

    @property
    def from_cache(self) -> bool:
        return self.misses == 0

    def summary(self) -> str:
        """`17 units, 17 built (15 processes + session)` or `17 units from cache`, for the
        init split."""
        n = len(self.built)
        units = f"{n} unit{'s' if n != 1 else ''}"
        if not self.misses:
            return f"{units} from cache"
        helpers = []
        if self.resident:
            helpers.append(f"{self.resident} resident")
        if self.workers:
            helpers.append(f"{self.workers} process{'es' if self.workers != 1 else ''}")
        where = f" ({' + '.join([*helpers, 'session'])})" if helpers else ""
        return f"{units}, {self.misses} built{where}"

    def entry(self, name: str) -> str | None:
        """The kernel-cache entry of the unit holding kernel `name` (None: not cached)."""
        return self._entries.get(name)

    def kernel(self, name: str) -> Any:
        """A new kernel object for kernel `name`, from the unit that holds it: a RawKernel
        (raw_kernel.py) where the C API is at hand, else pyopencl's."""
        import pyopencl as cl

        if name not in self._owner:
            raise KeyError(f"no kernel {name!r} in the delegate's program")
        lib = opencl_library()
        if lib is None:
            return cl.Kernel(self._owner[name], name)
        return guarded("creating a kernel", lambda: RawKernel(lib, self._owner[name], name))


def build_jobs(most: int) -> int:
    """Units built at once: one per CPU this process may use, at most `most` (the
    switches' max_build_jobs)."""
    return min(usable_cpus(), most)


def build_units(
    ctx: Any,
    device: Any,
    info: DeviceInfo,
    storage: str,
    cache: KernelCache | None,
    token: str,
    units: list[str],
    half_weights: bool = False,
    jobs: int = 1,
    switches: Switches = DEFAULTS,
) -> ProgramSet:
    """Build `units` (build_program's arguments otherwise), `jobs` at a time: where the
    driver compiles one program at a time per process, by the host's resident builders
    (build_pool.py, whatever `jobs` is) and worker processes (build_workers.py: as many
    and as long as `switches` allow), else in threads."""
    options = build_options(storage, info, half_weights)
    prebuilt = workers = resident = 0
    if cache is not None and build_workers.compiles_one_at_a_time(info):
        prebuilt, workers, resident = build_workers.build_in_workers(
            device,
            info,
            cache,
            token,
            units,
            options,
            jobs,
            ctx,
            switches.max_build_workers,
            switches.build_worker_timeout_s,
        )
    lib = opencl_library()
    if lib is None or jobs <= 1 or len(units) == 1:
        return ProgramSet(
            [
                build_program(ctx, device, info, storage, cache, token, unit, half_weights)
                for unit in units
            ],
            prebuilt,
            workers,
            resident,
        )

    def raw(unit: str) -> Any:
        key = program_key(info, token, unit, options)
        return build_raw(lib, ctx, device, info, cache, key, unit, options)

    with ThreadPoolExecutor(min(jobs, len(units))) as pool:
        raws = guarded("building the delegate's kernels", lambda: list(pool.map(raw, units)))
    built = [finish_build(r, device, options) for r in raws]
    return ProgramSet(built, prebuilt, workers, resident)
