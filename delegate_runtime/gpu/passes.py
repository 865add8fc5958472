"""A GPU session as named passes, in the order it runs them: what each does, where its
code is, and the switch (gpu/switches.py) that turns it off, where it has one. Passes
without a switch are the path itself; the others are fast paths, each tested against
`Switches.plain()` on the same model (tests/ops/test_plain_paths.py, docs/gpu_passes.md).

    GpuSession.__init__          fold, partition            (gpu/delegate.py)
    preparation.lower_partitions fuse, concat_views, lower  (opencl/preparation.py)
    preparation.model_program    specialize, persist
    preparation.open_context     host_edges (made with the queue, used from bind on)
    preparation.build_program    build
    preparation.make_executors   bind, hot_path, native_loop, copy_helpers, pinned

Op profiling is no pass: it observes the path with an event per launch, which turns off
what makes no events (execution_plan.py says which).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Pass:
    """One step of a session: its name, its module, what it does, and the Switches field
    that turns it off (None: it always runs) with the value that does."""

    name: str
    module: str
    what: str
    switch: str | None = None
    off: Any = False

    def runs(self, switches: Any) -> bool:
        """Whether `switches` leave this pass on (a device may still not offer it: the
        session's execution plan and its facts say what ran)."""
        return self.switch is None or getattr(switches, self.switch) != self.off


#: The session's passes, in order.
PASSES: tuple[Pass, ...] = (
    Pass(
        "fold",
        "gpu/fold.py",
        "static ops (SHAPE, constant chains, weights' DEQUANTIZE) become constants",
        "fold",
    ),
    Pass(
        "partition",
        "gpu/partition.py",
        "the nodes the GPU takes, in partitions; those too small for it stay on the CPU "
        "(gpu/placement.py)",
    ),
    Pass(
        "fuse",
        "gpu/opencl/fusions/",
        "kernels that also run the nodes around them (one module per fusion)",
        "fuse",
    ),
    Pass(
        "concat_views",
        "gpu/opencl/concat_views.py",
        "tensors written in place inside a channel concatenation's output",
        "concat_views",
    ),
    Pass(
        "lower",
        "gpu/opencl/lowering.py",
        "each node's launches (its record's lowering), edges staged in float32",
    ),
    Pass(
        "specialize",
        "gpu/opencl/specialize.py",
        "a program of the model's own, its launches' arguments compiled in",
        "specialize",
    ),
    Pass(
        "persist",
        "gpu/opencl/persistent.py",
        "runs of launches as one persistent kernel with grid barriers",
        "persistent",
    ),
    Pass(
        "host_edges",
        "gpu/opencl/host_edges.py",
        "partition inputs and outputs in host memory the GPU maps (NVIDIA)",
        "host_edges",
    ),
    Pass("build", "gpu/opencl/program_units.py", "the program built, or read from the cache"),
    Pass("bind", "gpu/opencl/executor.py", "memory planned, kernels' arguments set once"),
    Pass(
        "hot_path",
        "gpu/opencl/hot_path.py",
        "launches and copies through OpenCL's C API, no events (else pyopencl)",
        "hot_path",
    ),
    Pass(
        "native_loop",
        "gpu/opencl/native_library.py",
        "the launch loop and the input copy in C (else Python and numpy)",
        "native_loop",
    ),
    Pass(
        "copy_helpers",
        "gpu/opencl/host_copy.py",
        "helper threads sharing a large input copy (native library and host edges)",
        "copy_helpers",
        0,
    ),
    Pass(
        "pinned",
        "gpu/opencl/executor.py",
        "page-locked host arrays for the copies, on GPUs",
        "pinned",
    ),
)

PASS_NAMES: tuple[str, ...] = tuple(p.name for p in PASSES)


def passes_on(switches: Any) -> list[str]:
    """The names of the passes `switches` leave on, in order."""
    return [p.name for p in PASSES if p.runs(switches)]
