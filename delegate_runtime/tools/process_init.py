"""Init split in two: what the first session in a process pays once (the reader's and
the reference kernels' modules, the OpenCL device: the driver loaded, its context begun in
a thread), and what each model pays (reading it, folding, partitioning, the delegate's
program, lowering, uploads, and whatever of the context's making the model's reading and
lowering did not cover: the session's "context" phase).

A fresh `devicefarm benchmark` pays both, as a fresh `benchmark_model` does, and its
`Init:` figure is their sum; a lab agent runs job after job in one process, so only its
first job pays the first part. Both parts are reported so the two can be told apart.
"""

from __future__ import annotations

import time
from typing import Any

#: GpuSession.init_phases_ms names, as the init line spells them.
GPU_PHASES = {
    "fold_and_partition": "fold and partition",
    "device": "device",
    "lower": "lower",
    "layout": "arena layout",
    "context": "context (beyond the lowering and layout)",
    "lower_again": "lower again",
    "program": "program",
    "launch_loop": "launch loop",
    "upload": "upload",
}


def prepare_process(delegate: str, device: str | None = None) -> int:
    """Pay the once-per-process costs of sessions on `delegate` now (the OpenCL context
    begun, in a thread); returns the microseconds spent (near 0 once paid). Raises what
    the session would raise for a missing device; leaves a missing GPU extra and a
    context the driver refuses to the session's own clear errors."""
    start = time.perf_counter_ns()
    import tflite  # noqa: F401  (the reader's flatbuffer schema)

    from .. import validate  # noqa: F401
    from ..ops.registry import supported_ops

    supported_ops()  # imports every reference kernel module
    if delegate == "gpu":
        try:  # the delegate's modules (and pyopencl) that a session imports on first use
            from ..gpu import delegate as _  # noqa: F401
            from ..gpu.opencl import preparation  # noqa: F401
            from ..gpu.opencl.runtime import select_device, start_shared_context
        except ImportError:
            pass
        else:
            # the context is made in a thread while the model is read and lowered: the
            # session waits for what is left of it (its "context" phase)
            start_shared_context(select_device(device))
            from ..gpu.opencl.native_library import native_library

            native_library()  # compiles the C launch loop and copy the first time here
    return (time.perf_counter_ns() - start) // 1000


def init_split_line(process_us: int, read_us: int, session_us: int, session: Any) -> str:
    """`Init split (ms): once per process 1102.3 (...), this model 70.1 (read 3.2, ...)`:
    the model's part by phase, the GPU delegate's phases when it has them."""
    phases = getattr(session, "init_phases_ms", None) or {}
    steps = []
    for key, name in GPU_PHASES.items():
        if key in phases:
            note = ""
            if key == "program":
                own = getattr(session, "specialized_kernels", 0)
                notes = [f"{own} specialized"] if own else []
                summary = getattr(session, "program_summary", "")
                if summary:
                    notes.append(summary)
                else:
                    notes += ["from cache"] if session.program_from_cache else []
                if getattr(session, "program_beside_upload", False):
                    notes.append("beside the upload")
                note = f" ({', '.join(notes)})" if notes else ""
            elif key == "launch_loop" and getattr(session, "launch_loop", ""):
                launches, kernels = getattr(session, "persistent_runs", (0, 0))
                inside = f", {launches} launches in {kernels} persistent" if kernels else ""
                note = f" ({session.launch_loop}{inside})"
            elif key == "lower" and getattr(session, "lowering_from_cache", False):
                note = " (from cache)"
            elif key == "upload" and _precision(session) == "fp16":
                note = f" (weights in {'half' if session.half_weights else 'float32'})"
            steps.append(f"{name} {phases[key]:.1f}{note}")
    detail = f": {', '.join(steps)}" if steps else ""
    parts = [f"read {read_us / 1e3:.1f}", f"session {session_us / 1e3:.1f}{detail}"]
    return (
        f"Init split (ms): once per process {process_us / 1e3:.1f} (runtime modules, "
        f"OpenCL device), this model {(read_us + session_us) / 1e3:.1f} "
        f"({', '.join(parts)})"
    )


def _precision(session: Any) -> str:
    """The GPU session's precision ("fp32"/"fp16"), "" for other sessions."""
    return getattr(getattr(session, "options", None), "precision", "")
