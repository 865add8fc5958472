"""What a launch's arguments cost the host (why copies take the arena,
delegate_runtime/gpu/opencl/arena.py): docs/notebook/15-2026-11-28-one-allocation-per-partition-every-launch-a-copy.md, "One allocation per
partition". The model sessions without the arena it also timed were deleted with that
variant (docs/notebook/29-2026-12-03-deleted-variants.md).

python bench/arena_costs.py [--device SPEC] [--rounds 2]

`arguments`: one do-nothing kernel with a GEMM's arguments (11 buffers, 14 int, 6 float4),
the same buffers as sub-buffers of one allocation, the buffers alone, one buffer, one
buffer and local memory: 24 launches back to back through the hot path's loop, host us
per launch and with the finish.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

LAUNCHES = 24


def argument_costs(device: str | None, rounds: int) -> None:
    import pyopencl as cl

    from delegate_runtime.gpu.opencl.capi import opencl_library
    from delegate_runtime.gpu.opencl.hot_path import HotPath
    from delegate_runtime.gpu.opencl.runtime import select_device

    dev = select_device(device)
    ctx = cl.Context([dev])
    q = cl.CommandQueue(ctx)
    bufs = ", ".join(f"__global float* b{i}" for i in range(11))
    ints = ", ".join(f"int i{i}" for i in range(14))
    f4s = ", ".join(f"float4 f{i}" for i in range(6))
    one = "__global float* b0 = (__global float*)base; __global float* b3 = b0 + 1024;"
    source = f"""
    __kernel void many({bufs}, {ints}, {f4s}) {{
      if (get_global_id(0) == 0) b3[0] = b0[0] + i0 + f0.x; }}
    __kernel void bufs_only({bufs}) {{ if (get_global_id(0) == 0) b3[0] = b0[0]; }}
    __kernel void one(__global uchar* base) {{ {one} if (get_global_id(0) == 0) b3[0] = b0[0]; }}
    __kernel void one_local(__global uchar* base, __local float* s) {{ {one}
      s[get_local_id(0)] = 1.0f; barrier(CLK_LOCAL_MEM_FENCE);
      if (get_global_id(0) == 0) b3[0] = b0[0] + s[1]; }}
    """
    prg = cl.Program(ctx, source).build()
    mf = cl.mem_flags
    distinct = [cl.Buffer(ctx, mf.READ_WRITE, 1 << 20) for _ in range(11)]
    whole = cl.Buffer(ctx, mf.READ_WRITE, 11 << 20)
    subs = [whole.get_sub_region(i << 20, 1 << 20) for i in range(11)]
    scalars = [np.int32(i) for i in range(14)] + [np.zeros(4, np.float32)] * 6

    def kernel(name, args):
        k = cl.Kernel(prg, name)
        k.set_args(*args)
        return k

    cases = {
        "11 buffers, 14 int, 6 float4": kernel("many", distinct + scalars),
        "11 sub-buffers, 14 int, 6 float4": kernel("many", subs + scalars),
        "11 buffers": kernel("bufs_only", distinct),
        "1 buffer": kernel("one", [whole]),
        "1 buffer, local memory": kernel("one_local", [whole, cl.LocalMemory(512)]),
    }
    lib = opencl_library()
    print(f"\n{dev.name}: {LAUNCHES} launches of (256, 112, 4) / (16, 16, 1), median of 300")
    print("| arguments | round | host us per launch | with finish us |\n| --- | --- | --- | --- |")
    for r in range(rounds):
        for name, k in cases.items():
            hot = HotPath(lib, q, [(k, (256, 112, 4), (16, 16, 1))] * LAUNCHES)
            enq, tot = timed_enqueues(hot, 300)
            print(f"| {name} | {r + 1} | {enq / LAUNCHES:.2f} | {tot:.1f} |")


def timed_enqueues(hot, runs: int) -> tuple[float, float]:
    """Median us of enqueueing `hot`'s launches, and of that with the finish."""
    enq, tot = [], []
    for _ in range(runs):
        hot.finish()
        t0 = time.perf_counter_ns()
        hot.enqueue(6)
        t1 = time.perf_counter_ns()
        hot.finish()
        enq.append((t1 - t0) / 1e3)
        tot.append((time.perf_counter_ns() - t0) / 1e3)
    return statistics.median(enq), statistics.median(tot)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default=None)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    argument_costs(a.device, a.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
