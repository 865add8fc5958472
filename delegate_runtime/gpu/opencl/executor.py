"""One GPU partition on OpenCL: memory planned once, kernels bound once, one queue.

`run` copies the partition's inputs in, enqueues every launch with no host
synchronisation between them, copies the outputs out and waits once.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import ModelError
from ...graph import Subgraph
from ...ops.common import dequantize, quantize
from ..execution_plan import ExecutionPlan
from ..switches import Switches
from . import grid_record, host_copy, persistent
from .arena import Arena, ArenaImage
from .capi import CLCallError, opencl_library
from .hot_path import HotPath
from .launch import (
    IN_ARENA,
    Buf,
    Const,
    Counters,
    Local,
    Lowered,
    LoweredPartition,
    Scratch,
    Staging,
)
from .persistent import Run
from .program_units import ProgramSet
from .raw_kernel import RawKernel
from .runtime import device_error
from .specialize import OFFSETS_PER_PARAM, generic_name


@dataclass
class MemoryPlan:
    """Runtime tensors mapped to shared buffers whose lifetimes do not overlap."""

    buffer_of: dict[int, int]  #: root tensor -> buffer id
    buffer_bytes: list[int]

    @property
    def total_bytes(self) -> int:
        return sum(self.buffer_bytes)


def plan_memory(
    lowered: Lowered, sizes: dict[int, int], inputs: list[int], outputs: list[int]
) -> MemoryPlan:
    """Greedy best-fit reuse by first and last use over the launch sequence."""
    first: dict[int, int] = {t: -1 for t in inputs}
    last: dict[int, int] = {}
    for step, launch in enumerate(lowered.launches):
        for arg in launch.args:
            if isinstance(arg, Buf):
                first.setdefault(arg.tensor, step)
                last[arg.tensor] = step
    end = len(lowered.launches)
    for t in outputs:
        first.setdefault(t, end)
        last[t] = end + 1
    for t in inputs:
        last.setdefault(t, -1)
    order = sorted(first, key=lambda t: (first[t], t))
    buffer_of: dict[int, int] = {}
    buffer_bytes: list[int] = []
    free: list[int] = []
    live: list[tuple[int, int]] = []  # (last use, buffer)
    for t in order:
        start = first[t]
        for item in [x for x in live if x[0] < start]:
            live.remove(item)
            free.append(item[1])
        need = max(sizes[t], 4)
        fitting = [b for b in free if buffer_bytes[b] >= need]
        if fitting:
            b = min(fitting, key=lambda b: buffer_bytes[b])
            free.remove(b)
        else:
            b = len(buffer_bytes)
            buffer_bytes.append(need)
        buffer_of[t] = b
        live.append((last.get(t, start), b))
    return MemoryPlan(buffer_of, buffer_bytes)


@dataclass(frozen=True)
class SessionDevice:
    """What every partition of a session shares on its device: the OpenCL context and
    queue, the built program, the model's main subgraph, the storage type, the session's
    plan and switches, and the native library and host-memory edges where it has them."""

    ctx: Any
    queue: Any
    programs: ProgramSet | Future[ProgramSet]  #: or its loading (preparation.start_program)
    sg: Subgraph
    storage: np.dtype
    plan: ExecutionPlan
    switches: Switches
    native: Any = None  #: the native library (native_library.py), or None
    host_edges: Any = None  #: host_edges.HostEdges, or None


@dataclass(frozen=True)
class PartitionLayout:
    """A partition's memory laid out before its device is open: its launches on root
    tensors, the memory plan and the arena's image (a warm start makes it while NVIDIA's
    driver makes the context: nothing here needs the device but its sub-buffer alignment)."""

    part: LoweredPartition
    rooted: Lowered
    memory: MemoryPlan
    image: ArenaImage


def lay_out(
    sg: Subgraph, part: LoweredPartition, storage: np.dtype, base_align_bits: int
) -> PartitionLayout:
    """`part`'s layout for a session storing floats as `storage` on a device whose
    sub-buffers align to `base_align_bits`."""
    lowered, alias = part.lowered, part.lowered.alias

    def root(t: int) -> int:
        return _root(alias, t)

    edges = [root(t) for t in part.inputs], [root(t) for t in part.outputs]
    rooted = Lowered([_rooted(launch, root) for launch in lowered.launches], lowered.consts, {})
    sizes = _root_sizes(sg, storage, lowered, [*part.inputs, *part.outputs], root)
    memory = plan_memory(rooted, sizes, *edges)
    launches = rooted.launches
    scratch = max([a.nbytes for ln in launches for a in ln.args if isinstance(a, Scratch)] + [4])
    counters = max([a.count for ln in launches for a in ln.args if isinstance(a, Counters)] + [1])
    consts = {k: _const_host(v, storage, k in part.float_consts) for k, v in rooted.consts.items()}
    image = ArenaImage.lay_out(
        base_align_bits,
        consts,
        counters,
        memory.buffer_bytes,
        scratch,
        whole=any(ln.copy_args and ln.copy_args.offsets for ln in launches),
    )
    return PartitionLayout(part, rooted, memory, image)


def _root(alias: dict[int, int], t: int) -> int:
    while t in alias:
        t = alias[t]
    return t


def _root_sizes(
    sg: Subgraph, storage: np.dtype, lowered: Lowered, edges: list[int], root: Any
) -> dict[int, int]:
    """Bytes of each root tensor's buffer: the largest view of it a launch or an edge
    names, or a concatenation's whole output where no launch names it."""
    sizes: dict[int, int] = {}
    named = [a for launch in lowered.launches for a in launch.args] + [Buf(t) for t in edges]
    for arg in named:
        if isinstance(arg, Buf):  # a root holds its views: the largest size
            r, n = root(arg.tensor), sg.tensors[arg.tensor].size
            sizes[r] = max(sizes.get(r, 0), n * storage.itemsize)
    for r in sizes:  # a concatenation's whole output, where no launch names it
        sizes[r] = max(sizes[r], sg.tensors[r].size * storage.itemsize)
    return sizes


def _const_host(v: np.ndarray, storage: np.dtype, float32: bool) -> np.ndarray:
    """A constant as uploaded: floats in the storage type, or float32 where its kernels
    read it so (`float32`: const_types.py)."""
    if v.dtype.kind == "f":
        return np.ascontiguousarray(v, dtype=np.float32 if float32 else storage)
    return np.ascontiguousarray(v)


def pyopencl_kernel(kernel: Any) -> Any:
    """`kernel` as pyopencl enqueues it: a RawKernel's wrapper (raw_kernel.py), else itself."""
    return kernel.pyopencl if isinstance(kernel, RawKernel) else kernel


def enqueue_once(queue: Any, kernel: Any, gsize: tuple, lsize: tuple | None) -> None:
    """One launch of `kernel` without an event: a RawKernel's through the C API (making
    its pyopencl wrapper costs ~1 ms), else pyopencl's."""
    if isinstance(kernel, RawKernel):
        kernel.enqueue(queue, gsize, lsize)
    else:
        import pyopencl as cl

        cl.enqueue_nd_range_kernel(queue, kernel, gsize, lsize)


class PartitionExecutor:
    """Runs one lowered partition; built once per session, in steps: its memory planned,
    the arena and staging buffers allocated, its launches bound (runs of them as persistent
    kernels where planned), its copies prepared."""

    def __init__(
        self, shared: SessionDevice, part: LoweredPartition, layout: PartitionLayout | None = None
    ):
        import pyopencl as cl

        self.cl = cl
        #: the session's switches: flushes, persistent grids, input copies
        self.switches = shared.switches
        #: the session's paths (gpu/execution_plan.py): hot path or pyopencl, pinned copies
        self.execution_plan = shared.plan
        self.queue = shared.queue
        self.sg = shared.sg
        self.storage = np.dtype(shared.storage)
        self.alias = part.lowered.alias
        self.inputs = [self.root(t) for t in part.inputs]
        self.input_tensors = part.inputs
        self.outputs = part.outputs
        if layout is None or layout.part is not part:  # laid out here, the device open
            layout = lay_out(self.sg, part, self.storage, self.queue.device.mem_base_addr_align)
        rooted = layout.rooted
        #: its tensors' shared buffers (plan_memory)
        self.memory = layout.memory
        try:
            self.arena = Arena(shared.ctx, self.queue, layout.image)
            #: float32 buffers that inputs and outputs pass through (staging_edges.py), and
            #: those in host memory as the host sees them (host_edges.py)
            self.staging, self.mapped = self._staging(shared.ctx, rooted, shared.host_edges)
            programs = shared.programs
            if isinstance(programs, Future):  # loading beside the uploads: wait for it
                programs = programs.result()
            self._bind_launches(programs, rooted)
            if part.lowered.runs:  # planned only where the session's plan runs them
                self._persist(shared.ctx, programs, part.lowered.runs)
        except (cl.Error, CLCallError) as exc:
            raise device_error(exc, "preparing the GPU partition") from exc
        self._prepare_copies(shared.ctx, shared.native)

    def _staging(
        self, ctx: Any, rooted: Lowered, host_edges: Any
    ) -> tuple[dict[int, Any], dict[int, np.ndarray]]:
        """The float32 staging buffer of each edge tensor a launch names (in host memory
        where `host_edges` makes them), and the host's view of those in host memory."""
        staging: dict[int, Any] = {}
        mapped: dict[int, np.ndarray] = {}
        named = [a.tensor for ln in rooted.launches for a in ln.args if isinstance(a, Staging)]
        for t in dict.fromkeys(named):
            tensor = self.sg.tensors[t]
            if host_edges is not None:
                buf, host = host_edges.buffer(4 * tensor.size)
                mapped[t] = host[: 4 * tensor.size].view(np.float32).reshape(tensor.shape)
            else:
                buf = self.cl.Buffer(ctx, self.cl.mem_flags.READ_WRITE, max(4 * tensor.size, 4))
            staging[t] = buf
        return staging, mapped

    def _bind_launches(self, programs: ProgramSet, rooted: Lowered) -> None:
        """Each launch's kernel with its arguments set, and the nodes it computes."""
        self.launches = rooted.launches
        self.kernels = [self._bind(programs, launch) for launch in rooted.launches]
        self.nodes = [launch.node for launch in rooted.launches]
        self.covers = [
            launch.covers or ((launch.node,) if launch.node >= 0 else ())
            for launch in rooted.launches
        ]
        #: what an invoke enqueues: `kernels`, with runs of them as persistent kernels
        self.enqueued = list(self.kernels)
        #: the runs that became persistent kernels, each with its state buffer
        self.persistent: list[tuple[Run, Any]] = []
        #: the persistent kernels' trials that found a grid the device could not hold
        self.failed_trials = 0

    def _prepare_copies(self, ctx: Any, native: Any) -> None:
        """What an invoke copies in and out, and how: the hot path (with the native
        library where given, and pinned host arrays where the plan has them) or pyopencl."""
        plan = self.execution_plan
        #: the copies an invoke enqueues: inputs in, outputs out (not those in host memory)
        self.uploaded = [t for t in self.input_tensors if t not in self.mapped]
        self.downloaded = [t for t in self.outputs if t not in self.mapped]
        self.sources = [self._edge_buffer(t) for t in self.downloaded]
        self.destinations = [self._edge_buffer(t) for t in self.uploaded]
        lib = opencl_library() if plan.hot_path else None
        copies = host_copy.Settings.current(self.switches)
        self.hot = (
            HotPath(lib, self.queue, self.enqueued, native, copies) if lib is not None else None
        )
        pin = plan.pinned and self.hot is not None
        self.pinned = self._pin(ctx, self.uploaded) if pin else {}
        self.pinned_out = self._pin(ctx, self.downloaded) if pin else {}
        self.last_events: list[Any] = []

    def _persist(self, ctx: Any, programs: ProgramSet, runs: list[Run]) -> None:
        """Each run's launches replaced by its persistent kernel in `enqueued` (`kernels`,
        `nodes` and `covers` still name the launches: what is computed, node by node).
        A persistent kernel takes the arena and a state buffer holding the barrier counts
        and each layer's arena offsets. Each is run once here, at the grid sizes
        persistent.grid_sizes offers (from the one it held at last time on this device:
        grid_record.py), until its barriers all fill; a run whose groups the device
        cannot hold at once at any of them keeps its launches."""
        cl = self.cl
        sw = self.switches
        sizes = persistent.grid_sizes(self.queue.device.max_compute_units, sw)
        for run in sorted(runs, key=lambda r: -r.start):  # later first: positions before hold
            vectors = [
                self._offset_vectors(ln).reshape(-1) for ln in self.launches[run.start : run.end]
            ]
            header = np.zeros(persistent.HEADER, np.int32)
            header[persistent.LIMIT] = sw.persistent_check_spins
            words = np.concatenate([header, *vectors])
            flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
            state = cl.Buffer(ctx, flags, hostbuf=words)
            kernel = programs.kernel(run.kernel)
            kernel.set_args(self.arena.buffer, state, *[self.staging[t] for t in run.edges])
            unit = programs.entry(run.kernel)  # its kernel-cache entry
            known = grid_record.held(unit, run.kernel)
            for groups in grid_record.to_try(sizes, known):
                entry = (kernel, (groups * persistent.GROUP_ITEMS,), (persistent.GROUP_ITEMS,))
                enqueue_once(self.queue, kernel, *entry[1:])
                done = np.empty(persistent.HEADER, np.int32)
                cl.enqueue_copy(self.queue, done, state)
                if not done[persistent.FAILED]:
                    if groups != known:
                        grid_record.remember(unit, run.kernel, groups)
                    header[persistent.LIMIT] = sw.persistent_run_spins
                    cl.enqueue_copy(self.queue, state, header)
                    self.enqueued[run.start : run.end] = [entry]
                    self.persistent.insert(0, (run, state))
                    break
                # layers ran out of order: counts and the GEMM tiles' counters start again
                self.failed_trials += 1
                cl.enqueue_copy(self.queue, state, header)
                counters, at = self.arena.locate(("counters",))
                size = self.arena.sizes[("counters",)]
                cl.enqueue_fill_buffer(self.queue, counters, np.int32(0), at, size).wait()

    def _pin(self, ctx: Any, tensors: list[int]) -> dict[int, np.ndarray]:
        """Page-locked host arrays that inputs are copied into before upload and outputs
        are read back into. A discrete GPU's DMA reaches them directly; pageable memory
        goes through a driver copy, and on NVIDIA a pageable read-back delays the end of
        one inference in two by about 150 us (`bench/diag_gpu.py --only copies`).
        They come from mapping ALLOC_HOST_PTR buffers, the way NVIDIA's guide obtains
        pinned memory; the buffers themselves are never used on the device."""
        cl = self.cl
        pinned = {}
        for t in tensors:
            tensor = self.sg.tensors[t]
            if tensor.size == 0 or t in pinned:
                continue
            dtype = np.dtype(np.float32) if t in self.staging else self.storage
            flags = cl.mem_flags.READ_WRITE | cl.mem_flags.ALLOC_HOST_PTR
            try:
                buf = cl.Buffer(ctx, flags, tensor.size * dtype.itemsize)
                access = cl.map_flags.READ | cl.map_flags.WRITE
                host, _ = cl.enqueue_map_buffer(self.queue, buf, access, 0, tensor.shape, dtype)
            except cl.Error:
                continue  # no pinned memory to spare: copy through pageable memory
            pinned[t] = host
        return pinned

    def root(self, t: int) -> int:
        return _root(self.alias, t)

    def _bind(self, programs: ProgramSet, launch: Any) -> tuple[Any, tuple, tuple | None]:
        """A kernel object with its arguments set once. A specialized copy
        (`launch.copy_args`) takes the arena and its buffers' offsets first, then its
        remaining arguments."""
        kernel = programs.kernel(launch.kernel)
        copy = launch.copy_args
        positions = range(len(launch.args)) if copy is None else copy.kept
        args = [self._arg(launch.args[p]) for p in positions]
        if copy is not None and copy.offsets:
            args = [self.arena.buffer, *self._offset_vectors(launch), *args]
        kernel.set_args(*args)
        return kernel, launch.gsize, launch.lsize

    def _offset_vectors(self, launch: Any) -> np.ndarray:
        """A specialized copy's buffer offsets in the arena, as its int16 parameters take
        them: [vectors, OFFSETS_PER_PARAM] in ARENA_UNITs, zero past the last."""
        units = [self.arena.units(self._region(launch.args[p])) for p in launch.copy_args.offsets]
        vectors = np.zeros((-(-len(units) // OFFSETS_PER_PARAM), OFFSETS_PER_PARAM), np.int32)
        vectors.reshape(-1)[: len(units)] = units
        return vectors

    def _region(self, arg: Any) -> tuple:
        """The arena region holding a buffer argument."""
        if isinstance(arg, Buf):
            return ("buffer", self.memory.buffer_of[arg.tensor])
        if isinstance(arg, Const):
            return ("const", arg.key)
        if isinstance(arg, Scratch):
            return ("scratch",)
        if isinstance(arg, Counters):
            return ("counters",)
        raise TypeError(f"{arg!r} lies in no arena region")

    def _arg(self, arg: Any) -> Any:
        """What a launch argument is bound as: a buffer's sub-buffer, local memory or the
        value itself."""
        if isinstance(arg, Local):
            return self.cl.LocalMemory(arg.nbytes)
        if isinstance(arg, IN_ARENA):
            return self.arena.region(self._region(arg))
        if isinstance(arg, Staging):
            return self.staging[arg.tensor]
        return arg

    @property
    def kernel_names(self) -> list[str]:
        """Each launch's generic kernel, in order (a specialized copy named as its original)."""
        return [generic_name(kernel.function_name) for kernel, _, _ in self.kernels]

    @property
    def device_bytes(self) -> int:
        return self.arena.nbytes + sum(b.size for b in self.staging.values())

    def _edge_buffer(self, t: int) -> tuple[Any, int]:
        """Where input `t` is written or output `t` read, and at which byte offset: its
        float32 staging buffer, if any, else its region of the arena."""
        if t in self.staging:
            return self.staging[t], 0
        return self.arena.locate(("buffer", self.memory.buffer_of[self.root(t)]))

    def _output_host(self, t: int) -> np.ndarray:
        if t in self.mapped:
            return self.mapped[t]
        if t in self.pinned_out:
            return self.pinned_out[t]
        staged = t in self.staging
        return np.empty(self.sg.tensors[t].shape, np.float32 if staged else self.storage)

    def run(self, values: dict[int, np.ndarray]) -> None:
        """Read the partition's inputs from `values` and write its outputs there."""
        hosts = []
        for t in self.input_tensors:
            x = self._to_host(t, values[t])
            if t in self.mapped:  # the device reads it there: no copy to enqueue
                if self.hot is not None:
                    self.hot.copy_in(self.mapped[t], x)
                else:
                    np.copyto(self.mapped[t], x)
            elif t in self.pinned:
                np.copyto(self.pinned[t], x)
                hosts.append(self.pinned[t])
            else:
                hosts.append(x)
        # _from_storage copies, so a pinned or mapped array is free again once its result is made
        results = [(t, self._output_host(t)) for t in self.downloaded]
        if self.hot is not None:
            self._run_hot(hosts, results)
        else:
            self._run_pyopencl(hosts, results)
        read = dict(results)
        for t in self.outputs:
            values[t] = self._from_storage(t, read[t] if t in read else self.mapped[t])

    def _run_hot(self, hosts: list[np.ndarray], results: list[tuple[int, np.ndarray]]) -> None:
        hot = self.hot
        try:
            try:
                for host, (dst, offset) in zip(hosts, self.destinations, strict=True):
                    hot.write(dst, host, offset)
                hot.enqueue(self.switches.flush_every)
                for (_, host), (src, offset) in zip(results, self.sources, strict=True):
                    hot.read(src, host, offset)
            finally:
                hot.finish()  # the host arrays stay referenced until the copies are done
        except CLCallError as exc:
            raise device_error(exc, "running the GPU partition") from exc

    def _run_pyopencl(self, hosts: list[np.ndarray], results: list[tuple[int, np.ndarray]]) -> None:
        """The same through pyopencl, keeping an event per launch where the plan profiles."""
        cl = self.cl
        q = self.queue
        try:
            for host, (dst, offset) in zip(hosts, self.destinations, strict=True):
                cl.enqueue_copy(q, dst, host, dst_offset=offset, is_blocking=False)
            events = []
            for i, (kernel, g, lsz) in enumerate(self.kernels):
                events.append(cl.enqueue_nd_range_kernel(q, pyopencl_kernel(kernel), g, lsz))
                if i % self.switches.flush_every == 0:
                    q.flush()  # NOTE: NVIDIA holds enqueued work until a flush; start early
            for (_, host), (src, offset) in zip(results, self.sources, strict=True):
                cl.enqueue_copy(q, host, src, src_offset=offset, is_blocking=False)
            q.finish()
        except cl.Error as exc:
            raise device_error(exc, "running the GPU partition") from exc
        self.last_events = events if self.execution_plan.profiling else []

    def _to_host(self, t: int, x: np.ndarray) -> np.ndarray:
        """The host array to upload: float32 to staging, else the storage type."""
        tensor = self.sg.tensors[t]
        x = np.asarray(x)
        if tuple(x.shape) != tuple(tensor.shape):
            # the partition was sized from the declared shape; a CPU op upstream made another
            raise ModelError(
                f"tensor {tensor.name!r} enters the GPU partition with shape {list(x.shape)}, "
                f"but the model declares {list(tensor.shape)}"
            )
        if x.dtype.kind in "iu" and tensor.quantization is not None:
            x = dequantize(x, tensor.quantization)
        dtype = np.float32 if t in self.staging else self.storage
        return np.ascontiguousarray(x, dtype=dtype)

    def _from_storage(self, t: int, host: np.ndarray) -> np.ndarray:
        tensor = self.sg.tensors[t]
        f = host.astype(np.float32)  # a copy: `host` may be a pinned array used again
        if tensor.dtype.kind in "iu" and tensor.quantization is not None:
            return quantize(f, tensor.quantization, tensor.dtype)
        if tensor.dtype == np.bool_:
            return f > 0.5
        return f.astype(tensor.dtype, copy=False)

    def profile_ns(self) -> dict[int, int]:
        """Device time per node of the last run (needs a profiling queue). A fused
        kernel's time is its producer's; the nodes it absorbed take 0 (no launch)."""
        per_node: dict[int, int] = {}
        if not self.last_events:
            return per_node
        for node, covers, evt in zip(self.nodes, self.covers, self.last_events, strict=True):
            if node < 0:
                continue  # boundary conversions
            per_node[node] = per_node.get(node, 0) + (evt.profile.end - evt.profile.start)
            for other in covers:
                per_node.setdefault(other, 0)
        return per_node

    @property
    def fused_kernels(self) -> list[tuple[int, ...]]:
        """The nodes of each launch that does the work of several, producer first."""
        return sorted({c for c in self.covers if len(c) > 1})


def _rooted(launch: Any, root: Any) -> Any:
    from dataclasses import replace

    args = [Buf(root(a.tensor)) if isinstance(a, Buf) else a for a in launch.args]
    return replace(launch, args=args)
