"""Where a model's cold program build goes, and what builds it faster: its units built one
after another, in threads, or in processes, and its persistent unit alone.

    python bench/diag_build.py MODEL [--device NVIDIA] [--precision fp32] [--jobs 16]
        [--each] [--set persistent.MAX_RUN_BYTES=64000]   (a switch: gpu/switches.py)
        [--each --options=-cl-nv-opt-level=0 ...]

`--options` (with --each, repeatable) builds the units once more with those options added
to the session's, each in a fresh process, and prints each set's seconds beside the
session's own.

`--each` builds the units one after another in one process instead, after a unit of the
helpers alone (every unit holds them): each unit's size, kernels and seconds, largest
first, and what the helpers cost each unit.

The units are those a session builds (opencl/program_units.py). Every timing is a fresh
child process with a new, empty driver cache (CUDA_CACHE_PATH, POCL_CACHE_DIR) and no
kernel cache of ours; the figure is the wall time of the builds alone, after the context.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any


def session_units(
    model: str, precision: str, device: str | None, jobs: int, switches: Any = None
) -> list[str]:
    """The units a session of `model` with `switches` builds, caught before it builds them."""
    from delegate_runtime import load_model
    from delegate_runtime.gpu import delegate
    from delegate_runtime.gpu.opencl import program_units

    caught: list[list[str]] = []

    class Caught(Exception):
        pass

    def catch(*args, **kwargs):  # type: ignore[no-untyped-def]
        caught.append(args[6])
        raise Caught

    program_units.build_units = catch
    with contextlib.suppress(Caught):
        delegate.GpuSession(
            load_model(model),
            precision=precision,
            device=device,
            build_jobs=jobs,
            serialization_dir=tempfile.mkdtemp(),
            log=io.StringIO(),
            switches=switches,
        )
    return caught[0]


def child(units_file: str, indices: list[int], how: str, device: str | None, opts: str) -> None:
    import pyopencl as cl

    from delegate_runtime.gpu.opencl.capi import build_from_source, opencl_library
    from delegate_runtime.gpu.opencl.runtime import select_device, shared_context

    units = json.loads(Path(units_file).read_text())
    dev = select_device(device)
    ctx = shared_context(dev)
    lib = opencl_library()
    start = time.perf_counter()

    def build(i: int) -> float:
        t = time.perf_counter()
        program, err = build_from_source(lib, ctx, dev, units[i], opts)
        assert not err, program.get_build_info(dev, cl.program_build_info.LOG)
        return time.perf_counter() - t

    if how == "threads":
        with ThreadPoolExecutor(len(indices)) as pool:
            each = list(pool.map(build, indices))
    else:
        each = [build(i) for i in indices]
    print(json.dumps({"s": time.perf_counter() - start, "each": each}))


def run(args: list[str]) -> dict:
    env = dict(os.environ)
    env["CUDA_CACHE_PATH"] = tempfile.mkdtemp(prefix="cuda-")
    env["POCL_CACHE_DIR"] = tempfile.mkdtemp(prefix="pocl-")
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=env)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise SystemExit(out.stderr[-2000:])
    return json.loads(lines[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?")
    ap.add_argument("--device", default=None)
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--indices", default="", help=argparse.SUPPRESS)
    ap.add_argument("--how", default="serial", help=argparse.SUPPRESS)
    ap.add_argument("--opts", default="", help=argparse.SUPPRESS)
    ap.add_argument("--each", action="store_true", help="each unit's build, one at a time")
    ap.add_argument("--set", action="append", default=[], help="SWITCH=VALUE (gpu/switches.py)")
    ap.add_argument(
        "--options", action="append", default=[], help="with --each: build options to add"
    )
    a = ap.parse_args()
    if a.child:
        child(a.child, [int(i) for i in a.indices.split(",")], a.how, a.device, a.opts)
        return 0
    from cold_start import apply_settings

    from delegate_runtime.gpu.opencl.cl_source import read_source
    from delegate_runtime.gpu.opencl.program import build_options
    from delegate_runtime.gpu.opencl.program_units import without_kernels
    from delegate_runtime.gpu.opencl.runtime import describe, select_device

    switches = apply_settings(a.set)
    units = session_units(a.model, a.precision, a.device, a.jobs, switches)
    opts = build_options(a.precision, describe(select_device(a.device)))
    path = Path(tempfile.mkdtemp()) / "units.json"
    if a.each:
        units = sorted(units, key=len, reverse=True)
        # the helpers of the smallest unit: a persistent unit's helpers call functions
        # only its kernels define (NVIDIA's ptxas: "Unresolved extern function")
        path.write_text(json.dumps([without_kernels(units[-1]), *units]))
        dev = ["--device", a.device] if a.device else []
        indices = ",".join(map(str, range(len(units) + 1)))
        sets = [opts, *(f"{opts} {extra}" for extra in a.options)]
        each = [
            run(["--child", str(path), f"--opts={o}", *dev, "--indices", indices])["each"]
            for o in sets
        ]
        print(f"{Path(a.model).stem}: {len(units)} units; helpers alone {each[0][0]:.2f} s")
        print("  options: " + " | ".join(["session's", *a.options]))
        for i, unit in enumerate(units, start=1):
            kernels = len(read_source(unit)[2])
            secs = "  ".join(f"{e[i]:5.2f} s" for e in each)
            print(f"  {len(unit) / 1e3:6.1f} kB  {kernels:3d} kernels  {secs}")
        for o, e in zip(["session's", *a.options], each, strict=True):
            print(f"  {o}: sum {sum(e[1:]):.1f} s; largest {max(e[1:]):.2f} s")
        return 0
    path.write_text(json.dumps(units))
    base = list(range(len(units) - 1))  # the last unit: the persistent kernels, if any
    common = ["--child", str(path), "--opts", opts] + (["--device", a.device] if a.device else [])
    print(f"{Path(a.model).stem}: {len(units)} units, {sum(map(len, units)) / 1e3:.0f} kB")
    last = run([*common, "--indices", str(len(units) - 1)])
    print(f"last unit alone: {last['s']:.1f} s")
    serial = run([*common, "--indices", ",".join(map(str, base))])
    print(
        f"other units, one after another: {serial['s']:.1f} s "
        f"(each {[round(x, 1) for x in serial['each']]})"
    )
    threads = run([*common, "--indices", ",".join(map(str, base)), "--how", "threads"])
    print(f"other units, {len(base)} threads: {threads['s']:.1f} s")
    start = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, *common, "--indices", str(i)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "CUDA_CACHE_PATH": tempfile.mkdtemp()},
        )
        for i in base
    ]
    for p in procs:
        p.wait()
    print(
        f"other units, {len(base)} processes: {time.perf_counter() - start:.1f} s "
        "(process start-up and contexts included)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
