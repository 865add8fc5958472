"""How a GPU session runs its model, decided once when the session is made, from its
options, its switches (switches.py) and the device: what is compiled, how launches are
enqueued, where inputs and outputs lie. The session passes the plan down; nothing below
asks the options or the switches again which path to take.

    plan = plan_execution(switches, profiling=False, cpu_runtime="litert",
                          specialize_option=None, device=info)

The switches turn the fast paths off one by one (`hot_path` off: launches through
pyopencl as profiling has them, but with no events; `Switches.plain()`: all of them).

Op profiling times each launch by its own OpenCL event (on a profiling queue), so a
profiling session launches its kernels one by one through pyopencl: no persistent kernels
(one would time many layers as one; they are neither planned nor compiled), no hot path
(its C API calls and C loop make no events), so neither host-memory edges nor pinned
copies (they serve the hot path's copies), and its CPU nodes on the reference (timed node
by node). Its GEMMs are still lowered as the shipped path lowers them, so that the profile
times the shipped path's kernels. Its figures are labelled as a profile's in the
configuration record (`gpu.session.profiling`, launch loop `pyopencl`, another
fingerprint); tools/benchmark.py times the shipped path and profiles in a pass of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from .cpu_runs import REFERENCE
from .switches import Switches

if TYPE_CHECKING:
    from .opencl.runtime import DeviceInfo


@dataclass(frozen=True)
class ExecutionPlan:
    """A session's paths (see the module's docstring). Where a path also needs the device
    or the machine to offer it (host memory the GPU maps, a C compiler, OpenCL's C
    library), `True` asks for it and the session records what it got."""

    #: op profiling: each launch through pyopencl with its own event
    profiling: bool
    #: what runs the nodes the GPU does not take (cpu_runs.py)
    cpu_runtime: str
    #: launches and copies through OpenCL's C API with no events (opencl/hot_path.py);
    #: False: through pyopencl
    hot_path: bool
    #: the hot path's native library: the C launch loop and the C input copy
    #: (opencl/native_library.py)
    native_library: bool
    #: inputs and outputs in host memory the GPU maps (opencl/host_edges.py)
    host_edges: bool
    #: a program of the model's own, its launches' arguments compiled in
    #: (opencl/specialize.py)
    specialize: bool = False
    #: runs of launches as persistent kernels (opencl/persistent.py): planned, compiled and
    #: run only where this holds
    persistent: bool = False
    #: work groups a GEMM aims for per compute unit: the persistent kernels' grid where
    #: the shipped path runs them, also when profiling; None: the switches'
    #: gemm_groups_per_cu
    gemm_groups_per_cu: int | None = None
    #: page-locked host arrays for the hot path's copies (a discrete GPU's DMA reaches them)
    pinned: bool = False


def plan_execution(
    switches: Switches,
    *,
    profiling: bool,
    cpu_runtime: str,
    specialize_option: bool | None,
    device: DeviceInfo | None = None,
) -> ExecutionPlan:
    """The plan for a session with these options (`specialize_option`: the session's
    `specialize` option, None: as the switches say) and `switches` on `device`; without a
    device (before one is chosen, or with no GPU partition) nothing is compiled for one."""
    hot = not profiling and switches.hot_path
    plan = ExecutionPlan(
        profiling=profiling,
        cpu_runtime=REFERENCE if profiling else cpu_runtime,
        hot_path=hot,
        native_library=hot and switches.native_loop,
        host_edges=hot and switches.host_edges,
    )
    if device is None:
        return plan
    from .opencl import persistent, specialize  # the backend's rules, once it has a device

    own = specialize.enabled(device.is_gpu, specialize_option, switches)
    # the shipped path's choice: its GEMMs aim for the persistent grid, profiled or not
    shipped_persistent = own and persistent.enabled(device.platform, device.is_gpu, own, switches)
    return replace(
        plan,
        specialize=own,
        persistent=shipped_persistent and not profiling,
        gemm_groups_per_cu=switches.persistent_groups_per_cu if shipped_persistent else None,
        # at its default on GPUs only (a discrete GPU's DMA reaches it); set, anywhere
        pinned=hot and _where_suited(switches, "pinned", device.is_gpu),
    )


def _where_suited(switches: Switches, name: str, suited: bool) -> bool:
    """An on/off switch's value where it was set, else (its default, on) where `suited`."""
    explicit = switches.explicit(name)
    return suited if explicit is None else explicit
