"""Where GPU latency goes: host enqueue cost, per-launch device gaps, copies, GEMM tuning.

python bench/diag_gpu.py --model MODEL [--device SPEC]
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


def med_us(fn, runs: int = 50) -> float:
    for _ in range(5):
        fn()
    ts = []
    for _ in range(runs):
        t = time.perf_counter_ns()
        fn()
        ts.append(time.perf_counter_ns() - t)
    return statistics.median(ts) / 1e3


def launch_costs(device: str | None) -> None:
    import pyopencl as cl

    from delegate_runtime.gpu.opencl.runtime import select_device

    d = select_device(device)
    ctx = cl.Context([d])
    q = cl.CommandQueue(ctx)
    prg = cl.Program(ctx, "__kernel void k(__global float* x) { x[get_global_id(0)] += 1.0f; }")
    prg = prg.build()
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4 * 1024)
    kern = cl.Kernel(prg, "k")
    kern.set_args(buf)
    for n in (1, 40):

        def run(n=n):
            for _ in range(n):
                cl.enqueue_nd_range_kernel(q, kern, (1024,), (128,))
            q.finish()

        def enqueue_only(n=n):
            for _ in range(n):
                cl.enqueue_nd_range_kernel(q, kern, (1024,), (128,))

        print(f"{n:3d} tiny launches + finish: {med_us(run):8.1f} us")
        t = med_us(enqueue_only)
        q.finish()
        print(f"{n:3d} tiny launches, enqueue only: {t:8.1f} us")
    host = np.random.rand(1, 224, 224, 3).astype(np.float32)
    big = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, host.nbytes)

    def copy_in():
        cl.enqueue_copy(q, big, host, is_blocking=False)
        q.finish()

    print(f"602 KB host->device + finish: {med_us(copy_in):8.1f} us")
    out = np.empty(1001, np.float32)

    def copy_out():
        cl.enqueue_copy(q, out, big, is_blocking=True)

    print(f"4 KB device->host blocking: {med_us(copy_out):8.1f} us")


def gemm_variants(model: str, device: str | None) -> None:
    from delegate_runtime import load_model
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.opencl import lowering, program

    m = load_model(model)
    t = m.main.tensors[m.main.inputs[0]]
    x = np.random.default_rng(0).uniform(-1, 1, t.shape).astype(np.float32)
    from delegate_runtime.gpu.opencl import executor

    for variant, g32, g64, per_cu, min_k in [
        ("base 32/2/32 64/4/32 x2 k64", (32, 2, 32), (64, 4, 32), 2, 64),
        ("32/2/32 64/4/32 x4 k64", (32, 2, 32), (64, 4, 32), 4, 64),
        ("32/2/32 64/4/32 x4 k32", (32, 2, 32), (64, 4, 32), 4, 32),
        ("32/2/16 64/4/16 x4 k32", (32, 2, 16), (64, 4, 16), 4, 32),
    ]:
        program.GEMM_VARIANTS["gemm32"] = g32
        program.GEMM_VARIANTS["gemm64"] = g64
        lowering.GEMM_GROUPS_PER_CU = per_cu
        lowering.MIN_SPLIT_K = min_k
        executor.FLUSH_EVERY = 6
        s = GpuSession(m, device=device, log=io.StringIO(), profiling=True)
        s.invoke([x])
        dev = sum(s.op_profile_ns().values()) / 1e3
        s2 = GpuSession(m, device=device, log=io.StringIO())
        wall = med_us(lambda s2=s2: s2.invoke([x]), 100)
        n = sum(len(e.kernels) for e in s2.executors)
        print(f"{variant:28s} launches {n:3d} device {dev:7.1f} us wall {wall:7.1f} us")
        if variant.startswith("base"):
            prof = s.op_profile_ns()
            ops = s.model.main.operators
            print(
                "   "
                + " ".join(f"{ops[k].op[:4]}{k}:{v / 1e3:.0f}" for k, v in sorted(prof.items()))
            )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--device", default=None)
    a = ap.parse_args()
    launch_costs(a.device)
    gemm_variants(a.model, a.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
