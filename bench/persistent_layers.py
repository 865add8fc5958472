"""Where a persistent kernel's time goes, layer by layer, on NVIDIA (issue 14).

A persistent kernel (opencl/persistent.py) runs many launches as layers of one kernel, so
OpenCL's profiling sees one command. With `persistent.LAYER_STAMPS` set, group 0 stamps
NVIDIA's global nanosecond timer and its SM's cycle counter at the kernel's start and
after each layer's grid barrier; this reads the stamps back after every invoke and prints,
per layer, the median time from the previous barrier to this one (the layer's work plus
one barrier), with the launch's kernel, grid and the model's ops it computes. The stamps
add one barrier after the last layer and two clock reads per layer, so the kernel runs
slightly slower than shipped; the invoke's host-in to host-out median is printed beside.

    python bench/persistent_layers.py MODEL [...] [--precision fp32] [--device NVIDIA]
        [--invokes 400] [--set MODULE.CONST=VALUE[,...]]

(`--set` as bench/ab_knobs.py's variants: constants of delegate_runtime.gpu modules.)
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def layer_table(path: str, precision: str, device: str | None, invokes: int) -> None:
    import pyopencl as cl
    from bench_zoo import inputs_for

    from delegate_runtime import load_model
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.opencl import persistent
    from delegate_runtime.gpu.opencl.specialize import generic_name

    persistent.LAYER_STAMPS = True
    model = load_model(path)
    session = GpuSession(model, precision=precision, device=device, log=io.StringIO())
    xs = inputs_for(path)
    runs = [(ex, run, state) for ex in session.executors for run, state in ex.persistent]
    if not runs:
        raise SystemExit(f"{path}: no persistent kernel on this device ({session.device_info})")
    hosts = [np.empty(state.size // 4, np.int32) for _, _, state in runs]
    deltas = [[[] for _ in range(run.end - run.start)] for _, run, _ in runs]
    cycles = [[[] for _ in range(run.end - run.start)] for _, run, _ in runs]
    after_start: list[float] = []
    walls: list[float] = []
    for i in range(invokes + 20):
        host_ns = time.time_ns()
        t0 = time.perf_counter_ns()
        session.invoke(xs)
        wall = (time.perf_counter_ns() - t0) / 1e3
        for r, ((ex, run, state), host) in enumerate(zip(runs, hosts, strict=True)):
            cl.enqueue_copy(session.queue, host, state)
            stamps = host[ex.stamps[run.kernel]].view(np.uint64).reshape(-1, 2).astype(np.int64)
            if i < 20:
                continue  # warm-up
            for k in range(len(stamps) - 1):
                deltas[r][k].append((stamps[k + 1, 0] - stamps[k, 0]) / 1e3)
                cycles[r][k].append(stamps[k + 1, 1] - stamps[k, 1])
            if r == 0:
                after_start.append((stamps[0, 0] - host_ns) / 1e3)
        if i >= 20:
            walls.append(wall)
    ops = model.main.operators
    print(
        f"\n{Path(path).name} {precision} on {session.device_info}: session.invoke median "
        f"{statistics.median(walls):.1f} us over {invokes} (with the stamps)"
    )
    print(
        f"first persistent kernel starts {statistics.median(after_start):.1f} us after the "
        "invoke's start (host clock against %globaltimer: meaningful only where they agree)"
    )
    for r, (ex, run, _) in enumerate(runs):
        total = sum(statistics.median(d) for d in deltas[r])
        all_ck = sum(statistics.median(c) for c in cycles[r])
        mhz = all_ck / total if total else 0.0
        print(
            f"\npersistent kernel {run.kernel}: launches {run.start}-{run.end - 1} of "
            f"{len(ex.launches)}, sum of layer medians {total:.1f} us "
            f"(group 0's SM at {mhz:.0f} MHz)"
        )
        print(
            f"{'#':>3s} {'us':>7s} {'p10':>7s} {'p90':>7s} {'share':>6s}  kernel  grid/group  ops"
        )
        for k, launch in enumerate(ex.launches[run.start : run.end]):
            d = sorted(deltas[r][k])
            med = statistics.median(d)
            p10, p90 = d[len(d) // 10], d[(9 * len(d)) // 10]
            covers = launch.covers or ((launch.node,) if launch.node >= 0 else ())
            names = "+".join(ops[n].op for n in covers) if covers else "-"
            print(
                f"{run.start + k:3d} {med:7.2f} {p10:7.2f} {p90:7.2f} {med / total:6.1%}  "
                f"{generic_name(launch.kernel)}  {launch.gsize}/{launch.lsize}  {names}"
            )
    others = [
        (i, ln)
        for ex in session.executors
        for i, ln in enumerate(ex.launches)
        if not any(owner is ex and run.start <= i < run.end for owner, run, _ in runs)
    ]
    print(
        "\nlaunches outside persistent kernels: "
        + (", ".join(f"{i} {generic_name(ln.kernel)} {ln.gsize}" for i, ln in others) or "none")
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "fp16"])
    ap.add_argument("--device", default=None)
    ap.add_argument("--invokes", type=int, default=400)
    ap.add_argument("--set", default="", help="MODULE.CONST=VALUE,... (as ab_knobs)")
    a = ap.parse_args()
    from ab_knobs import changed, parse_variant

    changes = parse_variant(f"set={a.set}")[1] if a.set else []
    with changed(changes):
        for path in a.models:
            layer_table(path, a.precision, a.device, a.invokes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
