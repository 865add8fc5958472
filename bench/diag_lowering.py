"""A warm start's host work on the GPU machine's plan, on any machine: folding and
partitioning, lowering, the model's program (specialized copies, persistent units) and the
kernel cache's look-up, timed without a GPU.

    python bench/diag_lowering.py MODEL [...] [--repeat 3] [--precision fp32]
        [--profile tottime|cumulative] [--digest]

A session on an NVIDIA GPU makes these on its host while the driver makes its context
(delegate.py's `lower` phase: 173-294 ms of a 330-441 ms warm start for NASNetMobile and
DenseNet121 on an H100's host, docs/benchmarks.md). Their plan depends on the device's
facts, not on the device: here they come from DEVICE (an H200's), so the lowering, its
specialized copies and its persistent kernels are the GPU's, and can be measured and
made faster on the CPU machine. `--digest` prints a digest of everything lowered (the
units' sources, every launch and constant): a change that speeds this up must leave it
unchanged.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import pstats
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

#: The facts of the H200 the shipped plan is made for (DeviceInfo's fields up to the
#: compute units, as its driver reports them; no cl_khr_fp16, docs/gpu_machine.md).
DEVICE = (
    "nvidia",
    "NVIDIA CUDA",
    "NVIDIA H200",
    "NVIDIA Corporation",
    "580.159.04",
    "OpenCL 3.0 CUDA",
    132,
)


def found_device(precision: str) -> Any:
    """A FoundDevice of DEVICE's facts and the shipped plan on it (no context)."""
    from delegate_runtime.gpu.cpu_runs import LITERT
    from delegate_runtime.gpu.execution_plan import plan_execution
    from delegate_runtime.gpu.opencl import preparation
    from delegate_runtime.gpu.opencl.runtime import DeviceInfo
    from delegate_runtime.gpu.switches import DEFAULTS

    info = DeviceInfo(*DEVICE, 140 << 30, False, True)
    plan = plan_execution(
        DEFAULTS, profiling=False, cpu_runtime=LITERT, device=info, specialize_option=None
    )
    return preparation.FoundDevice(None, info, plan, True, 4096)


def lower_once(path: str, precision: str, found: Any, jobs: int) -> tuple[dict, Any]:
    """The phases' milliseconds and what they made, as a session makes them; the cache's
    look-up is its keys' making (a digest of each unit's source), as a warm start makes
    them all."""
    from delegate_runtime import load_model
    from delegate_runtime.gpu.delegate import GpuDelegateOptions
    from delegate_runtime.gpu.fold import fold_constants
    from delegate_runtime.gpu.opencl import preparation as prep
    from delegate_runtime.gpu.opencl.program import build_options, program_key
    from delegate_runtime.gpu.partition import partition
    from delegate_runtime.gpu.support import SupportOptions
    from delegate_runtime.gpu.switches import DEFAULTS

    model = load_model(path)
    t0 = time.perf_counter()
    folded, _ = fold_constants(model, DEFAULTS.max_folded_elements)
    sg = folded.main
    opts = GpuDelegateOptions()  # a session's defaults
    parts_of = partition(
        sg, SupportOptions(opts.enable_quant), opts.max_delegated_partitions
    ).partitions
    t1 = time.perf_counter()
    staged = prep.staged_edges(precision, found)
    parts = prep.lower_partitions(sg, parts_of, precision, found, staged, DEFAULTS)
    t2 = time.perf_counter()
    program = prep.model_program(sg, parts_of, parts, precision, found, jobs, DEFAULTS)
    t3 = time.perf_counter()
    options = build_options(precision, found.info, program.half_weights)
    for unit in program.units:
        program_key(found.info, model.sha256, unit, options)
    t4 = time.perf_counter()
    ms = {
        "fold_and_partition": (t1 - t0) * 1e3,
        "lower_partitions": (t2 - t1) * 1e3,
        "model_program": (t3 - t2) * 1e3,
        "cache_lookup": (t4 - t3) * 1e3,
    }
    return ms, program


def _feed(h: Any, value: Any) -> None:
    if isinstance(value, np.ndarray):
        h.update(f"{value.dtype}{value.shape}".encode())
        h.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, (list, tuple)):
        h.update(b"[")
        for v in value:
            _feed(h, v)
        h.update(b"]")
    elif isinstance(value, dict):
        for k in sorted(value, key=repr):
            _feed(h, k)
            _feed(h, value[k])
    else:
        h.update(repr(value).encode())


def digest(program: Any) -> str:
    """sha256 of the program's units and every partition's launches and constants."""
    h = hashlib.sha256()
    for unit in program.units:
        h.update(unit.encode())
    for part in program.parts:
        low = part.lowered
        for launch in low.launches:
            _feed(h, (launch.kernel, launch.args, launch.gsize, launch.lsize, launch.node))
            _feed(h, (launch.covers, launch.copy_args))
        _feed(h, (low.consts, low.alias, low.runs, part.inputs, part.outputs))
    return h.hexdigest()[:16]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--jobs", type=int, default=16, help="units built at once (the GPU host's cores)"
    )
    ap.add_argument("--profile", default="", help="a pstats sort key: profile one lowering")
    ap.add_argument("--digest", action="store_true")
    a = ap.parse_args()
    from delegate_runtime.ops.registry import supported_ops

    supported_ops()  # the kernels' modules imported, as a lab agent has them
    found = found_device(a.precision)
    for path in a.models:
        runs = [lower_once(path, a.precision, found, a.jobs) for _ in range(a.repeat)]
        program = runs[-1][1]
        best = {k: min(r[0][k] for r in runs) for k in runs[0][0]}
        total = min(sum(r[0].values()) for r in runs)
        line = ", ".join(f"{k} {v:.0f}" for k, v in best.items())
        units = f"{len(program.units)} units, {sum(map(len, program.units)) / 1e6:.2f} MB"
        print(
            f"{Path(path).stem} {a.precision}: best of {a.repeat}: {total:.0f} ms ({line}); {units}"
        )
        if a.digest:
            print(f"  digest {digest(program)}")
        if a.profile:
            prof = cProfile.Profile()
            prof.enable()
            lower_once(path, a.precision, found, a.jobs)
            prof.disable()
            pstats.Stats(prof).sort_stats(a.profile).print_stats(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
