"""One GPU partition on OpenCL: memory planned once, kernels bound once, one queue.

`run` copies the partition's inputs in, enqueues every launch with no host
synchronisation between them, copies the outputs out and waits once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...graph import Subgraph
from ...ops.common import quantize
from .lowering import Buf, Const, Local, Lowered
from .runtime import device_error


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


class PartitionExecutor:
    """Runs one lowered partition; built once per session."""

    def __init__(
        self,
        ctx: Any,
        queue: Any,
        program: Any,
        sg: Subgraph,
        lowered: Lowered,
        inputs: list[int],
        outputs: list[int],
        storage: np.dtype,
        profiling: bool,
    ):
        import pyopencl as cl

        self.cl = cl
        self.queue = queue
        self.sg = sg
        self.storage = np.dtype(storage)
        self.profiling = profiling
        self.alias = lowered.alias
        self.inputs = [self.root(t) for t in inputs]
        self.input_tensors = inputs
        self.outputs = outputs
        sizes = {}
        for launch in lowered.launches:
            for arg in launch.args:
                if isinstance(arg, Buf):
                    sizes[self.root(arg.tensor)] = (
                        self.sg.tensors[arg.tensor].size * self.storage.itemsize
                    )
        for t in (*inputs, *outputs):
            sizes.setdefault(self.root(t), self.sg.tensors[t].size * self.storage.itemsize)
        rooted = Lowered(
            [_rooted(launch, self.root) for launch in lowered.launches], lowered.consts, {}
        )
        self.plan = plan_memory(rooted, sizes, self.inputs, [self.root(t) for t in outputs])
        mf = cl.mem_flags
        try:
            self.buffers = [cl.Buffer(ctx, mf.READ_WRITE, n) for n in self.plan.buffer_bytes]
            self.consts = {
                k: cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=self._const_host(v))
                for k, v in lowered.consts.items()
            }
            self.kernels = [self._bind(program, launch) for launch in rooted.launches]
        except cl.Error as exc:
            raise device_error(exc, "preparing the GPU partition") from exc
        self.const_bytes = sum(self._const_host(v).nbytes for v in lowered.consts.values())
        self.nodes = [launch.node for launch in rooted.launches]
        self.last_events: list[Any] = []

    def root(self, t: int) -> int:
        while t in self.alias:
            t = self.alias[t]
        return t

    def _const_host(self, v: np.ndarray) -> np.ndarray:
        if v.dtype.kind == "f":
            return np.ascontiguousarray(v.astype(self.storage))
        return np.ascontiguousarray(v)

    def _bind(self, program: Any, launch: Any) -> tuple[Any, tuple, tuple | None]:
        kernel = self.cl.Kernel(program, launch.kernel)
        args = []
        for arg in launch.args:
            if isinstance(arg, Buf):
                args.append(self.buffers[self.plan.buffer_of[arg.tensor]])
            elif isinstance(arg, Const):
                args.append(self.consts[arg.key])
            elif isinstance(arg, Local):
                args.append(self.cl.LocalMemory(arg.nbytes))
            else:
                args.append(arg)
        kernel.set_args(*args)
        return kernel, launch.gsize, launch.lsize

    @property
    def device_bytes(self) -> int:
        return self.plan.total_bytes + self.const_bytes

    def run(self, values: dict[int, np.ndarray]) -> None:
        """Read the partition's inputs from `values` and write its outputs there."""
        cl = self.cl
        q = self.queue
        keep = []
        try:
            for t, root in zip(self.input_tensors, self.inputs):
                host = self._to_storage(t, values[t])
                keep.append(host)
                cl.enqueue_copy(q, self.buffers[self.plan.buffer_of[root]], host, is_blocking=False)
            events = []
            for kernel, g, lsz in self.kernels:
                events.append(cl.enqueue_nd_range_kernel(q, kernel, g, lsz))
            results = []
            for t in self.outputs:
                host = np.empty(self.sg.tensors[t].shape, self.storage)
                cl.enqueue_copy(
                    q, host, self.buffers[self.plan.buffer_of[self.root(t)]], is_blocking=False
                )
                results.append((t, host))
            q.finish()
        except cl.Error as exc:
            raise device_error(exc, "running the GPU partition") from exc
        self.last_events = events if self.profiling else []
        for t, host in results:
            values[t] = self._from_storage(t, host)

    def _to_storage(self, t: int, x: np.ndarray) -> np.ndarray:
        tensor = self.sg.tensors[t]
        x = np.asarray(x)
        if x.dtype.kind in "iu" and tensor.quantization is not None:
            from ...ops.common import dequantize

            x = dequantize(x, tensor.quantization)
        return np.ascontiguousarray(x, dtype=self.storage)

    def _from_storage(self, t: int, host: np.ndarray) -> np.ndarray:
        tensor = self.sg.tensors[t]
        f = host.astype(np.float32)
        if tensor.dtype.kind in "iu" and tensor.quantization is not None:
            return quantize(f, tensor.quantization, tensor.dtype)
        if tensor.dtype == np.bool_:
            return f > 0.5
        return f.astype(tensor.dtype, copy=False)

    def profile_ns(self) -> dict[int, int]:
        """Device time per node of the last run (needs a profiling queue)."""
        per_node: dict[int, int] = {}
        for node, evt in zip(self.nodes, self.last_events):
            per_node[node] = per_node.get(node, 0) + (evt.profile.end - evt.profile.start)
        return per_node


def _rooted(launch: Any, root: Any) -> Any:
    from dataclasses import replace

    args = [Buf(root(a.tensor)) if isinstance(a, Buf) else a for a in launch.args]
    return replace(launch, args=args)
