"""What a kernel boundary costs on the device, against a barrier across the whole grid inside
one persistent kernel (docs/notebook/17-2026-11-28-persistent-kernels-runs-of-launches-as-one.md).

Both sides are timed on the host from one event: the queue waits on a user event while the
commands are enqueued, so the device runs them back to back with no host in the way; the
time from releasing the event to `finish` is the device's, plus one fixed wake-up that the
difference between N and 0 removes.

- N empty kernels back to back (one group; 132 groups of 256 items);
- N dependent "layers" of a small stencil, one kernel each;
- the same N layers in one kernel of G groups with a grid barrier between them (a counter
  each group increments, then spins on), checked against numpy.

python bench/persistent_probe.py [--device NVIDIA]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SRC = r"""
__kernel void empty(__global float* x) {}

// Keeps the device busy for a while (the host enqueues what follows meanwhile).
__kernel void spin(__global float* x, int iterations) {
  float v = x[get_global_id(0)];
  for (int i = 0; i < iterations; ++i) v = v * 0.9999f + 0.5f;
  x[get_global_id(0)] = v;
}

// What the other groups wrote before the barrier is seen after it: OpenCL 1.2's mem_fence
// orders one item's own accesses only, so on NVIDIA a PTX fence at GPU scope.
#ifdef NV_PTX
#define GPU_FENCE() asm volatile("fence.acq_rel.gpu;" ::: "memory")
#else
#define GPU_FENCE() mem_fence(CLK_GLOBAL_MEM_FENCE)
#endif

// One layer: y[i] = 0.5 * (x[i] + x[(i * 7 + 1) % n]) + 1, grid-strided.
__kernel void layer(__global const float* x, __global float* y, int n) {
  for (int i = get_global_id(0); i < n; i += get_global_size(0))
    y[i] = 0.5f * (x[i] + x[(i * 7 + 1) % n]) + 1.0f;
}

// All groups arrive, then leave together: the counter only grows, barrier b waits for
// (b + 1) * groups arrivals; `spins` bounds the wait (a group not resident would hang us).
inline bool grid_sync(volatile __global int* count, int target, volatile __global int* failed) {
  barrier(CLK_GLOBAL_MEM_FENCE);
  if (get_local_id(0) == 0) {
    GPU_FENCE();
    atomic_inc(count);
    int spins = 0;
    while (*count < target) {
      if (++spins > 20000000) { *failed = 1; break; }
    }
    GPU_FENCE();
  }
  barrier(CLK_GLOBAL_MEM_FENCE);
  return *failed == 0;
}

__kernel void persistent(__global float* a, __global float* b, int n, int layers,
                         volatile __global int* count, volatile __global int* failed) {
  int groups = get_num_groups(0);
  for (int l = 0; l < layers; ++l) {
    __global const float* x = (l & 1) ? b : a;
    __global float* y = (l & 1) ? a : b;
    for (int i = get_global_id(0); i < n; i += get_global_size(0))
      y[i] = 0.5f * (x[i] + x[(i * 7 + 1) % n]) + 1.0f;
    if (!grid_sync(count, (l + 1) * groups, failed)) return;
  }
}
"""


def gated_us(ctx, q, enqueue, runs: int = 60) -> float:
    """Median device time of what `enqueue(wait_for)` puts on the queue behind a user event."""
    import pyopencl as cl

    ts = []
    for _ in range(runs):
        q.finish()
        gate = cl.UserEvent(ctx)
        enqueue([gate])
        q.flush()
        time.sleep(0.002)  # let the driver take everything before the gate opens
        t = time.perf_counter_ns()
        gate.set_status(cl.command_execution_status.COMPLETE)
        q.finish()
        ts.append(time.perf_counter_ns() - t)
    return statistics.median(ts[5:]) / 1e3


def stencil(x: np.ndarray, layers: int) -> np.ndarray:
    n = x.size
    other = (np.arange(n, dtype=np.int64) * 7 + 1) % n
    for _ in range(layers):
        x = (np.float32(0.5) * (x + x[other]) + np.float32(1.0)).astype(np.float32)
    return x


def main() -> int:
    import pyopencl as cl

    from delegate_runtime.gpu.opencl.runtime import select_device

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--layers", type=int, default=24)
    a = ap.parse_args()
    d = select_device(a.device)
    ctx = cl.Context([d])
    q = cl.CommandQueue(ctx)
    prg = cl.Program(ctx, SRC).build("-DNV_PTX" if "NVIDIA" in d.platform.name else "")
    cu = d.max_compute_units
    print(f"device {d.name}, {cu} compute units; {a.layers} layers")
    n = 100352  # 14 x 14 x 512
    x0 = np.random.default_rng(0).uniform(-1, 1, n).astype(np.float32)
    mf = cl.mem_flags
    bufs = [cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=x0) for _ in range(2)]
    count = cl.Buffer(ctx, mf.READ_WRITE, 4)
    failed = cl.Buffer(ctx, mf.READ_WRITE, 4)
    empty, layer, persistent = prg.empty, prg.layer, prg.persistent
    empty.set_args(bufs[0])
    N = a.layers

    spin = prg.spin
    spin_buf = cl.Buffer(ctx, mf.READ_WRITE, 4 * 256)
    spin.set_args(spin_buf, np.int32(400000 if "NVIDIA" in d.platform.name else 20000))

    def behind_spin(enqueue, runs: int = 40) -> float:
        """Median host time of a busy kernel then what `enqueue()` adds behind it."""
        ts = []
        for _ in range(runs):
            q.finish()
            t = time.perf_counter_ns()
            cl.enqueue_nd_range_kernel(q, spin, (256,), (256,))
            q.flush()
            enqueue()
            q.finish()
            ts.append(time.perf_counter_ns() - t)
        return statistics.median(ts[5:]) / 1e3

    for groups, local in ((1, 256), (cu, 256)):
        g = (groups * local,)
        base = behind_spin(lambda: None)
        for what, kernel in (("empty kernels", empty), ("stencil layers", layer)):
            for k in (1, N):

                def more(g=g, local=local, k=k, kernel=kernel):
                    for i in range(k):
                        if kernel is layer:
                            layer.set_args(bufs[i & 1], bufs[1 - (i & 1)], np.int32(n))
                        cl.enqueue_nd_range_kernel(q, kernel, g, (local,))
                        if i % 6 == 0:
                            q.flush()

                t = behind_spin(more)
                print(
                    f"behind a busy kernel ({base:.1f} us alone): {k} {what} of {groups} "
                    f"groups add {t - base:.1f} us, {(t - base) / k:.2f} us each"
                )

    for groups, local in ((1, 256), (cu, 256), (2 * cu, 256)):
        g = (groups * local,)

        def one(w, g=g, local=local):
            cl.enqueue_nd_range_kernel(q, empty, g, (local,), wait_for=w)

        t0 = gated_us(ctx, q, one)

        def many(w, g=g, local=local):
            cl.enqueue_nd_range_kernel(q, empty, g, (local,), wait_for=w)
            for _ in range(N - 1):
                cl.enqueue_nd_range_kernel(q, empty, g, (local,))

        tn = gated_us(ctx, q, many)
        print(
            f"empty kernels, {groups} groups of {local}: 1 {t0:.1f} us, {N} {tn:.1f} us -> "
            f"{(tn - t0) / (N - 1):.2f} us a kernel"
        )

    for groups, local in ((cu, 256), (2 * cu, 256), (4 * cu, 256)):
        g = (groups * local,)

        def layers_as_kernels(w, layers, g=g, local=local):
            for i in range(layers):
                layer.set_args(bufs[i & 1], bufs[1 - (i & 1)], np.int32(n))
                cl.enqueue_nd_range_kernel(q, layer, g, (local,), wait_for=w if i == 0 else None)

        t1 = gated_us(ctx, q, lambda w: layers_as_kernels(w, 1))
        tn = gated_us(ctx, q, lambda w: layers_as_kernels(w, N))

        def one_kernel(w, layers, g=g, local=local):
            cl.enqueue_fill_buffer(q, count, np.int32(0), 0, 4, wait_for=w)
            cl.enqueue_fill_buffer(q, failed, np.int32(0), 0, 4)
            persistent.set_args(bufs[0], bufs[1], np.int32(n), np.int32(layers), count, failed)
            cl.enqueue_nd_range_kernel(q, persistent, g, (local,))

        p1 = gated_us(ctx, q, lambda w: one_kernel(w, 1))
        pn = gated_us(ctx, q, lambda w: one_kernel(w, N))
        # correctness: N layers from x0 each way
        for b in bufs:
            cl.enqueue_copy(q, b, x0)
        one_kernel(None, N)
        got_p = np.empty(n, np.float32)
        cl.enqueue_copy(q, got_p, bufs[N & 1])
        flag = np.zeros(1, np.int32)
        cl.enqueue_copy(q, flag, failed)
        for b in bufs:
            cl.enqueue_copy(q, b, x0)
        layers_as_kernels(None, N)
        got_k = np.empty(n, np.float32)
        cl.enqueue_copy(q, got_k, bufs[N & 1])
        q.finish()
        want = stencil(x0, N)
        print(
            f"{groups} groups of {local}: layers as kernels 1 {t1:.1f}, {N} {tn:.1f} us -> "
            f"{(tn - t1) / (N - 1):.2f} us a layer; one kernel with grid barriers 1 {p1:.1f}, "
            f"{N} {pn:.1f} us -> {(pn - p1) / (N - 1):.2f} us a layer; "
            f"max diff kernels {np.abs(got_k - want).max():.2e}, persistent "
            f"{np.abs(got_p - want).max():.2e}, timed out {int(flag[0])}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
