"""Grid barriers inside one persistent kernel, several ways, on NVIDIA's OpenCL: what each
costs a layer at 132, 264 and 528 groups of 256 items (docs/notebook/21-2026-11-29-the-grid-barrier-s-line-persistent-kernels-at.md).

Each way runs L layers of a small stencil over 14x14x512 floats (or no work: `empty`)
with its barrier between them, in one kernel; the kernel's profiled time at L = 64 less
its time at L = 0, over 64, is a layer's cost. The stencil's outputs are checked against
numpy for every way and grid (a barrier that lets a group run ahead reads stale values).
Counts and flags only grow (each launch passes the epoch it starts from), so nothing is
reset between launches.

- before: each group's first item arrives with a release reduction on one counter and
  polls it with acquire loads, reading the failure word and the spin limit (in the
  counter's line) every spin (opencl/persistent.py until 2026-11-29);
- lean: the same, the limit in a register and the failure word read every 1024 spins;
- lean_line: lean, the counter alone in its 128-byte line (what persistent.py does now);
- go_flag: arrivals on a counter (an atomic that returns the count); the last to arrive
  stores the barrier's number to a flag in another line, which the others poll;
- flags_master: each group stores its number to its own line; group 0's items poll all
  of them, then release the grid through one flag the others poll;
- flags_all: each group stores its number to its own line and polls every group's;
- relaxed_line: lean_line polling with relaxed loads and one acquire fence after;
- spreadS: each group arrives on one of S counters (group g on g % S), each in its own
  line, and its first S items each poll one counter until it holds all of its groups'
  arrivals: the arrivals serialize on S lines, not one, with no second hop;
- spread8_relaxed: spread8 polling with relaxed loads and one acquire fence after.

python bench/barrier_probe.py --device NVIDIA [--runs 40]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from persistent_probe import stencil  # noqa: E402 (the same layer, checked the same way)

WAYS = (
    "before", "lean", "lean_line", "go_flag", "flags_master", "flags_all", "relaxed_line",
    "spread4", "spread8", "spread16", "spread32", "spread8_relaxed",
)  # fmt: skip

SRC = r"""
inline int ld_acq(volatile __global int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"((ulong)p) : "memory");
  return v;
}
inline void red_rel(volatile __global int* p) {
  asm volatile("red.release.gpu.global.add.s32 [%0], 1;" :: "l"((ulong)p) : "memory");
}
inline void st_rel(volatile __global int* p, int v) {
  asm volatile("st.release.gpu.global.s32 [%0], %1;" :: "l"((ulong)p), "r"(v) : "memory");
}
inline int ld_rlx(volatile __global int* p) {
  int v;
  asm volatile("ld.relaxed.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"((ulong)p) : "memory");
  return v;
}
inline int atom_acq_rel(volatile __global int* p) {
  int v;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;" : "=r"(v) : "l"((ulong)p) : "memory");
  return v;
}
#define FAILED 2
#define LIMIT 3
#define COUNT_LINE 64
#define GO 128
#define FLAGS 256
// Gives up (and marks the run failed) after the limit, so a grid the GPU cannot hold
// ends instead of hanging.
#define GIVE_UP(spins) \
  if (((spins) & 1023) == 1023 && (state[FAILED] || (spins) > lim)) { state[FAILED] = 1; break; }

inline void grid_sync(volatile __global int* state, int e, int G, int g, int t) {
  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
  int lim = state[LIMIT];
#if WAY == 0  // before
  if (t == 0) {
    red_rel(state);
    int target = e * G;
    for (int spins = 0; ld_acq(state) < target && !state[FAILED]; ++spins)
      if (spins > state[LIMIT]) state[FAILED] = 1;
  }
#elif WAY == 1 || WAY == 2  // lean, lean_line
  volatile __global int* count = state + (WAY == 2 ? COUNT_LINE : 0);
  if (t == 0) {
    red_rel(count);
    int target = e * G;
    for (int spins = 0; ld_acq(count) < target; ++spins) GIVE_UP(spins)
  }
#elif WAY == 3  // go_flag
  if (t == 0) {
    if (atom_acq_rel(state + COUNT_LINE) == e * G - 1) st_rel(state + GO, e);
    else
      for (int spins = 0; ld_acq(state + GO) < e; ++spins) GIVE_UP(spins)
  }
#elif WAY == 4  // flags_master
  if (t == 0) st_rel(state + FLAGS + 32 * g, e);
  if (g == 0) {
    for (int i = t; i < G; i += get_local_size(0))
      for (int spins = 0; ld_acq(state + FLAGS + 32 * i) < e; ++spins) GIVE_UP(spins)
    barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
    if (t == 0) st_rel(state + GO, e);
  } else if (t == 0) {
    for (int spins = 0; ld_acq(state + GO) < e; ++spins) GIVE_UP(spins)
  }
#elif WAY == 5  // flags_all
  if (t == 0) st_rel(state + FLAGS + 32 * g, e);
  for (int i = t; i < G; i += get_local_size(0))
    for (int spins = 0; ld_acq(state + FLAGS + 32 * i) < e; ++spins) GIVE_UP(spins)
#elif WAY == 6  // relaxed_line
  if (t == 0) {
    red_rel(state + COUNT_LINE);
    int target = e * G;
    for (int spins = 0; ld_rlx(state + COUNT_LINE) < target; ++spins) GIVE_UP(spins)
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
  }
#else  // spreadS: S counters from FLAGS on, 32 ints apart
  if (t == 0) red_rel(state + FLAGS + 32 * (g % S));
  if (t < S && t < G) {
    int mine = G / S + (t < G % S);  // groups arriving on counter t
    for (int spins = 0; POLL(state + FLAGS + 32 * t) < e * mine; ++spins) GIVE_UP(spins)
#if RELAXED
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
#endif
  }
#endif
  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
}

__kernel __attribute__((reqd_work_group_size(256, 1, 1)))
void persistent(__global float* a, __global float* b, int n, int layers, int work,
                int epoch, volatile __global int* state) {
  int G = get_num_groups(0), g = get_group_id(0), t = get_local_id(0);
  for (int l = 0; l < layers; ++l) {
    __global const float* x = (l & 1) ? b : a;
    __global float* y = (l & 1) ? a : b;
    if (work)
      for (int i = get_global_id(0); i < n; i += get_global_size(0))
        y[i] = 0.5f * (x[i] + x[(i * 7 + 1) % n]) + 1.0f;
    grid_sync(state, epoch + l + 1, G, g, t);
  }
}
"""


def measure(ctx, q, prg, groups: int, x0: np.ndarray, want: np.ndarray, layers: int, runs: int):
    """A layer's cost in us with no work and with the stencil, the stencil's max error
    after `layers` layers, and whether a spin limit was hit."""
    import pyopencl as cl

    mf, n = cl.mem_flags, x0.size
    state = np.zeros(256 + 32 * groups + 32, np.int32)
    state[3] = 1 << 24  # spin limit
    sbuf = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=state)
    bufs = [cl.Buffer(ctx, mf.READ_WRITE, 4 * n) for _ in range(2)]
    k = prg.persistent
    epoch = 0

    def run(count: int, work: int) -> float:
        nonlocal epoch
        k.set_args(*bufs, np.int32(n), np.int32(count), np.int32(work), np.int32(epoch), sbuf)
        ev = cl.enqueue_nd_range_kernel(q, k, (256 * groups,), (256,))
        ev.wait()
        epoch += count
        return (ev.profile.end - ev.profile.start) / 1e3

    per = {}
    for work in (0, 1):
        for count in (0, layers):
            per[(work, count)] = statistics.median([run(count, work) for _ in range(runs)][3:])
    cl.enqueue_copy(q, bufs[0], x0).wait()
    run(layers, 1)
    got = np.empty_like(x0)
    cl.enqueue_copy(q, got, bufs[layers & 1]).wait()
    cl.enqueue_copy(q, state, sbuf).wait()
    empty = (per[(0, layers)] - per[(0, 0)]) / layers
    work = (per[(1, layers)] - per[(1, 0)]) / layers
    return empty, work, float(np.max(np.abs(got - want))), bool(state[2])


def main() -> int:
    import pyopencl as cl

    from delegate_runtime.gpu.opencl.runtime import select_device

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--layers", type=int, default=64)
    ap.add_argument("--ways", default=",".join(WAYS))
    a = ap.parse_args()
    d = select_device(a.device)
    if "NVIDIA" not in d.platform.name:
        print("the barriers are NVIDIA's PTX; no NVIDIA device")
        return 1
    ctx = cl.Context([d])
    q = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    cu = d.max_compute_units
    n = 14 * 14 * 512
    x0 = np.random.default_rng(0).uniform(-1, 1, n).astype(np.float32)
    want = stencil(x0, a.layers)
    print(f"device {d.name}, {cu} compute units; {a.layers} layers; median of {a.runs}")
    print("| way | groups | us a layer, empty | us a layer, stencil | max |err| |")
    print("| --- | --- | --- | --- | --- |")
    for way in a.ways.split(","):
        spread = int(way[6:].split("_")[0]) if way.startswith("spread") else 1
        relaxed = int(way.endswith("_relaxed"))
        poll = "ld_rlx" if relaxed else "ld_acq"
        options = f"-DWAY={min(WAYS.index(way), 7)} -DS={spread} -DRELAXED={relaxed} -DPOLL={poll}"
        prg = cl.Program(ctx, SRC).build(options)
        for groups in (cu, 2 * cu, 4 * cu):
            empty, work, err, failed = measure(ctx, q, prg, groups, x0, want, a.layers, a.runs)
            note = " (spin limit hit)" if failed else ""
            print(f"| {way} | {groups} | {empty:.2f} | {work:.2f} | {err:.1e}{note} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
