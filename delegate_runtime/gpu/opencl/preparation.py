"""A GPU session's preparation on its OpenCL device, as the named steps the session
(gpu/delegate.py) runs in order, timing each as an init phase:

    cache_dir = kernel_cache_dir(options.serialization_dir)   # before the driver loads
    starting = start_device(options.device, plan_for)  # as the session starts: in
        # threads, the device found and its context made beside the folding
    found, opening = starting.result()                                      # "device"
    native = start_native(found.plan, cache_dir, switches)  # in a thread
    early = early_program.start(cache_dir, found.info, facts, opening.result, jobs)
        # (the units an earlier session kept, loading once the context is made)
    program, read = lowered_program(sg, partitions, precision, found, staged, jobs,
                                    switches, cache_dir, model_sha256)
        # (read from the kernel cache where an earlier session of the model kept it, else
        # lower_partitions, then model_program)
    keys, options = program_keys(found, program, precision, token)
    cached = program_cached(cache_dir, keys)                                # "lower"
    opened = opening.result()                                               # "context"
    programs = build_program(opened, program, precision, cache_dir, token, jobs, switches)
        # or, where cached: start_program(...) (taking early's load where it holds the
        # units), beside the uploads; or, where the plan starts on a first tier, that
        # tier's build (first_tier_program(program)) and start_program(...) for its own
    native.result()                                                         # "launch_loop"
    executors = make_executors(opened, programs, sg, program.parts, precision, native,
                               switches)                                    # "upload"
    launch_loop_facts(executors, switches)   # which loop runs, why, which build

Each step takes what those before it made and returns what it made. NVIDIA's driver takes
120-220 ms to make a context and lets other threads run meanwhile: lowering and writing
the program's source need only the device's facts, so they no longer wait for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ...graph import Subgraph
from ...submodel import boundary
from ..execution_plan import ExecutionPlan
from ..switches import Switches
from . import const_types, first_tier, host_edges, lowering_cache, persistent, specialize
from .cache import (
    CacheKey,
    KernelCache,
    bound_bytes,
    default_cache_dir,
    point_driver_cache,
    prune,
)
from .executor import PartitionExecutor, PartitionLayout, SessionDevice, lay_out
from .host_edges import HostEdges, host_edges_for
from .launch import Lowered, LoweredPartition
from .lowering import Lowerer
from .native_library import build_identity, native_library, unavailable
from .program import build_options, program_key, program_source
from .program_units import (
    ProgramSet,
    build_jobs,
    build_units,
    kernel_units,
    split_units,
    without_kernels,
)
from .runtime import DeviceInfo, describe, guarded, select_device, shared_context
from .staging_edges import with_staging_edges

T = TypeVar("T")


def kernel_cache_dir(serialization_dir: str | None) -> Path:
    """Where compiled programs are kept (`serialization_dir`, else the user's cache), the
    drivers' own caches pointed inside it."""
    cache_dir = Path(serialization_dir) if serialization_dir is not None else default_cache_dir()
    point_driver_cache(cache_dir)
    return cache_dir


@dataclass(frozen=True)
class FoundDevice:
    """The session's device, its facts and its plan on it: what lowering needs."""

    device: Any
    info: DeviceInfo
    plan: ExecutionPlan
    #: whether the device names the host-memory edges' extension (host_edges.offered),
    #: read here: while a context is being made, NVIDIA's driver answers a device query
    #: only once it is made, and pyopencl's call holds the GIL meanwhile (110 ms lost)
    host_edges_offered: bool
    #: the device's sub-buffer alignment (bits), read here for the same reason: the
    #: arenas are laid out while the context is being made (executor.lay_out)
    base_align_bits: int


@dataclass(frozen=True)
class OpenedDevice(FoundDevice):
    """A found device with its context and queue, and its host-memory edges where the
    plan asks for them and the device offers them."""

    ctx: Any
    queue: Any
    host_edges: HostEdges | None
    made_ms: float = 0.0  #: open_context's own time (in its thread)


def find_device(
    requested: str | None, plan_for: Callable[[DeviceInfo], ExecutionPlan]
) -> FoundDevice:
    """The device `requested` (select_device's argument) and the session's plan on it."""
    device = select_device(requested)
    info = describe(device)
    offered = host_edges.offered(device)
    return FoundDevice(device, info, plan_for(info), offered, device.mem_base_addr_align)


def open_context(found: FoundDevice) -> OpenedDevice:
    """`found` with its (shared) context and a queue: a profiling one where the plan times
    each launch."""
    import pyopencl as cl

    start = time.perf_counter()
    device, plan = found.device, found.plan
    props = cl.command_queue_properties.PROFILING_ENABLE if plan.profiling else 0
    ctx = shared_context(device)
    queue = guarded(
        "creating a command queue", lambda: cl.CommandQueue(ctx, device, properties=props)
    )
    edges = host_edges_for(ctx, queue) if plan.host_edges else None
    made_ms = (time.perf_counter() - start) * 1e3
    facts = (found.host_edges_offered, found.base_align_bits)
    return OpenedDevice(device, found.info, plan, *facts, ctx, queue, edges, made_ms)


def _in_thread(fn: Callable[[], T], name: str) -> Future[T]:
    """`fn()` in a thread of its own; its result (or its error) when asked."""
    pool = ThreadPoolExecutor(1, thread_name_prefix=name)
    try:
        return pool.submit(fn)
    finally:
        pool.shutdown(wait=False)


def start_context(found: FoundDevice) -> Future[OpenedDevice]:
    """open_context(found) in a thread of its own."""
    return _in_thread(lambda: open_context(found), "opencl-context")


@dataclass(frozen=True)
class DeviceStart:
    """The device find_device found, and its context begun (start_context)."""

    found: FoundDevice
    opening: Future[OpenedDevice]


def start_device(
    requested: str | None, plan_for: Callable[[DeviceInfo], ExecutionPlan]
) -> Future[DeviceStart]:
    """find_device and start_context in a thread, begun when the session starts, so that
    the driver's platform and context come beside the model's folding and partitioning;
    a failure (no such device) is raised where the session asks for the device."""

    def find_and_open() -> DeviceStart:
        found = find_device(requested, plan_for)
        return DeviceStart(found, start_context(found))

    return _in_thread(find_and_open, "opencl-device")


def staged_edges(precision: str, device: FoundDevice) -> bool:
    """Whether partitions' edges go through float32 staging buffers: half storage, or
    edges in host memory. Before the context (a FoundDevice): where the plan asks for them
    and the device names their extension; after it (an OpenedDevice): where a buffer's
    check on the context found them usable, the last word."""
    if isinstance(device, OpenedDevice):
        in_host = device.host_edges is not None
    else:
        in_host = device.plan.host_edges and device.host_edges_offered
    return precision == "fp16" or in_host


def lower_partitions(
    sg: Subgraph,
    partitions: list[list[int]],
    precision: str,
    found: FoundDevice,
    staged: bool,
    switches: Switches,
) -> list[LoweredPartition]:
    """Each partition's launches, its edges in float32 staging buffers where `staged`
    (staged_edges)."""
    parts = []
    for nodes in partitions:
        lowerer = Lowerer(
            sg, found.info.compute_units, precision, found.plan.gemm_groups_per_cu, switches
        )
        ins, outs = boundary(sg, nodes)
        lowerer.lower_partition(nodes, set(outs))
        lowered = lowerer.out
        if staged:
            sizes = {t: sg.tensors[t].size for t in (*ins, *outs)}
            lowered = with_staging_edges(lowered, sizes, ins, outs)
        parts.append(LoweredPartition(lowered, ins, outs))
    return parts


@dataclass(frozen=True)
class ModelProgram:
    """The program to build for a session's partitions: its units (program_units.py),
    its cache token ("program": the one every model shares; "model": one of its own), and
    what it holds; `parts` are the partitions with the constants read as float32."""

    units: list[str]
    token: str
    parts: list[LoweredPartition]
    half_weights: bool
    specialized_kernels: int


def model_program(
    sg: Subgraph,
    partitions: list[list[int]],
    parts: list[LoweredPartition],
    precision: str,
    found: FoundDevice,
    jobs: int,
    switches: Switches,
) -> ModelProgram:
    """The program for `parts`: the one every model shares (for the ops delegated), or,
    where the plan specializes (specialize.py), one of this model's own, its launches
    renamed to their copies, split into `jobs` units to build at once, with its persistent
    kernels where the plan runs them (their launches' runs recorded in each partition's
    `lowered.runs`)."""
    generic = program_source(ops={sg.operators[n].op for nodes in partitions for n in nodes})
    lowered = [part.lowered for part in parts]
    half = precision == "fp16"
    half_weights = half and const_types.weights_in_half(generic, lowered)
    parts = [
        replace(
            part,
            float_consts=frozenset(const_types.float32_consts(generic, part.lowered, half_weights)),
        )
        if half
        else part
        for part in parts
    ]
    plan = found.plan
    if not plan.specialize:
        # a GPU's driver builds a program's every kernel: only those launched, a unit each
        used = {launch.kernel for out in lowered for launch in out.launches}
        units = kernel_units(generic, used) if found.info.is_gpu else [generic]
        return ModelProgram(units, "program", parts, half_weights, 0)
    launches = [launch for out in lowered for launch in out.launches]
    own = specialize.model_program(generic, launches)
    for pos, name in own.names.items():
        launches[pos].kernel = name
        launches[pos].copy_args = own.args[pos]
    units = split_units(own.source, jobs)
    if plan.persistent:  # planned and compiled only where they run
        units += _persistent_units(own.source, lowered, found.info, switches)
    return ModelProgram(units, "model", parts, half_weights, own.specialized)


def first_tier_program(program: ModelProgram) -> ModelProgram | None:
    """What a session starts on while `program`, its own, builds (first_tier.py): its
    launches on the generic kernels, a unit each, shared by every model; None where
    `program` is the generic one."""
    if program.token != "model":
        return None
    parts = first_tier.generic_parts(program.parts)
    units = first_tier.generic_units(parts)
    return ModelProgram(units, first_tier.TOKEN, parts, program.half_weights, 0)


def _persistent_units(
    source: str, lowered: list[Lowered], info: DeviceInfo, switches: Switches
) -> list[str]:
    """The units of each partition's persistent kernels, each partition's runs recorded."""
    prelude = without_kernels(source) + persistent.prelude("NVIDIA" in info.platform)
    units = []
    for p, out in enumerate(lowered):
        out.runs, texts = persistent.plan_runs(source, out.launches, f"persistent{p}_", switches)
        units += [prelude + text for text in texts]
    return units


def jobs_for(requested: int | None, switches: Switches) -> int:
    """Program units built at once: as the session's option asks, else one per usable CPU
    within the switches' bound (program_units.build_jobs)."""
    return requested or build_jobs(switches.max_build_jobs)


def build_program(
    opened: OpenedDevice,
    program: ModelProgram,
    precision: str,
    cache_dir: Path,
    token: str,
    jobs: int,
    switches: Switches,
) -> ProgramSet:
    """`program`'s units built for the device (or read from the kernel cache under `token`);
    where any was built, the cache pruned to its bound in a thread (cache.py)."""
    cache = KernelCache(cache_dir)
    programs = build_units(
        opened.ctx,
        opened.device,
        opened.info,
        precision,
        cache,
        token,
        program.units,
        program.half_weights,
        jobs,
        switches,
    )
    if programs.misses:
        bound = bound_bytes()  # a bad setting is refused here, not lost in the thread
        _in_thread(lambda: prune(cache.dir, bound), "kernel-cache-prune")
    return programs


def lowering_facts(
    model_sha256: str,
    precision: str,
    staged: bool,
    jobs: int,
    partitions: list[list[int]],
    switches: Switches,
    found: FoundDevice,
) -> tuple[Any, ...]:
    """Every input of a session's lowering but the code (lowering_cache.py's key)."""
    return (model_sha256, precision, staged, jobs, partitions, switches, found.info, found.plan)


def lowered_program(
    sg: Subgraph,
    partitions: list[list[int]],
    precision: str,
    found: FoundDevice,
    staged: bool,
    jobs: int,
    switches: Switches,
    cache_dir: Path,
    model_sha256: str,
) -> tuple[ModelProgram, bool]:
    """The partitions lowered and their program (lower_partitions, model_program), read
    from the kernel cache where a session of the same model, precision, switches, device,
    plan and code kept it (lowering_cache.py), else made and kept; and whether it was read."""
    facts = lowering_facts(model_sha256, precision, staged, jobs, partitions, switches, found)
    key = lowering_cache.lowering_key(found.info.name, found.info.driver_version, facts)
    cache = KernelCache(cache_dir / lowering_cache.SUBDIR)
    kept = lowering_cache.load(cache, key)
    if isinstance(kept, ModelProgram):
        return kept, True
    parts = lower_partitions(sg, partitions, precision, found, staged, switches)
    program = model_program(sg, partitions, parts, precision, found, jobs, switches)
    lowering_cache.store(cache, key, program)
    return program, False


def program_keys(
    found: FoundDevice, program: ModelProgram, precision: str, token: str
) -> tuple[list[CacheKey], str]:
    """The kernel cache's keys of `program`'s units (build_program's), and their build
    options."""
    options = build_options(precision, found.info, program.half_weights)
    return [program_key(found.info, token, u, options) for u in program.units], options


def program_cached(cache_dir: Path, keys: list[CacheKey]) -> bool:
    """Whether the kernel cache holds every unit of a program (`keys`: program_keys')."""
    return KernelCache(cache_dir).holds_all(keys)


def start_program(build: Callable[[], ProgramSet]) -> Future[ProgramSet]:
    """`build()` (build_program's call) in a thread of its own, for a program the cache
    holds whole: the driver's loads (GIL-free) run beside the uploads, which do not need
    the program; the executors wait for it where they bind kernels. Its ProgramSet's
    `made_ms` is its own time, where the build did not time itself (an early load,
    early_program.py)."""

    def made() -> ProgramSet:
        start = time.perf_counter()
        programs = build()
        if not programs.made_ms:
            programs.made_ms = (time.perf_counter() - start) * 1e3
        return programs

    return _in_thread(made, "opencl-program")


def native_for(plan: ExecutionPlan, cache_dir: Path, switches: Switches) -> Any:
    """The native library where the plan has it and it was built (native_library.py), else
    None."""
    return native_library(cache_dir, switches) if plan.native_library else None


def start_native(plan: ExecutionPlan, cache_dir: Path, switches: Switches) -> Future[Any]:
    """native_for in a thread of its own: it needs no context, and building it (a new
    cache: ~140 ms of the C compiler) must not hold back a cold program's build."""
    return _in_thread(lambda: native_for(plan, cache_dir, switches), "launch-loop")


def lay_out_parts(
    sg: Subgraph, parts: list[LoweredPartition], precision: str, found: FoundDevice
) -> list[PartitionLayout]:
    """Each partition's memory and arena image (executor.lay_out): what a warm start makes
    while the driver makes its context."""
    return [lay_out(sg, part, _storage(precision), found.base_align_bits) for part in parts]


def _storage(precision: str) -> np.dtype:
    """How a session of `precision` stores floats on the device."""
    return np.dtype(np.float16 if precision == "fp16" else np.float32)


def make_executors(
    opened: OpenedDevice,
    programs: ProgramSet | Future[ProgramSet],
    sg: Subgraph,
    parts: list[LoweredPartition],
    precision: str,
    native: Any,
    switches: Switches,
    layouts: list[PartitionLayout] | None = None,
) -> list[PartitionExecutor]:
    """One executor per partition, sharing the device, the program (or its loading, which
    they wait for where they bind kernels) and the native library; `layouts`: the
    partitions' laid out earlier (lay_out_parts), where they are these parts'."""
    shared = SessionDevice(
        opened.ctx,
        opened.queue,
        programs,
        sg,
        _storage(precision),
        opened.plan,
        switches,
        native,
        opened.host_edges,
    )
    laid = {id(layout.part): layout for layout in layouts or ()}
    return [PartitionExecutor(shared, part, laid.get(id(part))) for part in parts]


def launch_loop_facts(
    executors: list[PartitionExecutor], switches: Switches
) -> tuple[str, str, str]:
    """How the executors enqueue their launches ("c", "python" or "pyopencl", joined by "+"),
    why "python" rather than "c" where it runs, and the C loop's build where it runs."""
    loops = {ex.hot.loop if ex.hot is not None else "pyopencl" for ex in executors}
    why = unavailable(switches) if "python" in loops else ""
    return "+".join(sorted(loops)), why, build_identity() if "c" in loops else ""
