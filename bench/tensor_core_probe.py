"""Inline PTX `mma.sync` in NVIDIA's OpenCL: one m16n8k16 tile against numpy, then a
straightforward tensor-core fp16 GEMM (bias, ReLU6, fp16 out) on MobileNet v1's GEMM
shapes, profiled per launch for four warp tilings (docs/notebook/15-2026-11-28-one-allocation-per-partition-every-launch-a-copy.md, "One allocation
per partition": tensor cores alone do not bring MobileNet v1 to 0.27 ms).

python bench/tensor_core_probe.py   (NVIDIA OpenCL registered; elsewhere the build fails)
"""

import sys

import numpy as np
import pyopencl as cl
from diag_gpu import MOBILENET_GEMMS

SRC = r"""
#define MMA(c, a, b) asm volatile( \
  "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" \
  : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) \
  : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))

__kernel void probe(__global const uint* A, __global const uint* B, __global float* C) {
  int lane = get_local_id(0), g = lane >> 2, t = lane & 3;
  uint a[4] = {A[g * 8 + t], A[(g + 8) * 8 + t], A[g * 8 + t + 4], A[(g + 8) * 8 + t + 4]};
  uint b[2] = {B[g * 8 + t], B[g * 8 + t + 4]};
  float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  MMA(c, a, b);
  C[g * 8 + 2 * t] = c[0]; C[g * 8 + 2 * t + 1] = c[1];
  C[(g + 8) * 8 + 2 * t] = c[2]; C[(g + 8) * 8 + 2 * t + 1] = c[3];
}

// C[M,N] = min(max(A[M,K] B[N,K]^T + bias, 0), 6), A and B fp16 bits, C fp16; K % 16 == 0, N % (8 WN) == 0.
// A work group of 4 warps: 2 along M, 2 along N; each warp WM x 16 rows by WN x 8 columns.
__kernel __attribute__((reqd_work_group_size(128, 1, 1)))
void tc_gemm(__global const uint* A, __global const uint* B, __global const float* bias,
             __global half* C, int M, int N, int K) {
  int lane = get_local_id(0) & 31, warp = get_local_id(0) >> 5;
  int g = lane >> 2, t = lane & 3;
  int m0 = (get_group_id(1) * 2 + (warp & 1)) * 16 * WM;
  int n0 = (get_group_id(0) * 2 + (warp >> 1)) * 8 * WN;
  if (m0 >= M || n0 >= N) return;
  int K2 = K / 2;
  float c[WM][WN][4];
  for (int i = 0; i < WM; ++i) for (int j = 0; j < WN; ++j) for (int e = 0; e < 4; ++e) c[i][j][e] = 0.0f;
  __global const uint* ar[WM][2];
  for (int i = 0; i < WM; ++i) {
    int r0 = min(m0 + i * 16 + g, M - 1), r1 = min(m0 + i * 16 + g + 8, M - 1);
    ar[i][0] = A + r0 * K2 + t; ar[i][1] = A + r1 * K2 + t;
  }
  __global const uint* br[WN];
  for (int j = 0; j < WN; ++j) br[j] = B + (n0 + j * 8 + g) * K2 + t;
  #pragma unroll 2
  for (int k = 0; k < K2; k += 8) {
    uint a[WM][4], b[WN][2];
    for (int i = 0; i < WM; ++i) {
      a[i][0] = ar[i][0][k]; a[i][1] = ar[i][1][k]; a[i][2] = ar[i][0][k + 4]; a[i][3] = ar[i][1][k + 4];
    }
    for (int j = 0; j < WN; ++j) { b[j][0] = br[j][k]; b[j][1] = br[j][k + 4]; }
    for (int i = 0; i < WM; ++i) for (int j = 0; j < WN; ++j) MMA(c[i][j], a[i], b[j]);
  }
  for (int i = 0; i < WM; ++i) for (int h = 0; h < 2; ++h) {
    int r = m0 + i * 16 + g + 8 * h;
    if (r >= M) continue;
    for (int j = 0; j < WN; ++j) {
      int col = n0 + j * 8 + 2 * t;
      float2 v = (float2)(c[i][j][2 * h], c[i][j][2 * h + 1]) + vload2(0, bias + col);
      vstore_half2(clamp(v, 0.0f, 6.0f), 0, C + r * N + col);
    }
  }
}
"""


def main() -> int:
    plat = [p for p in cl.get_platforms() if "NVIDIA" in p.name]
    dev = (plat[0] if plat else cl.get_platforms()[0]).get_devices()[0]
    ctx = cl.Context([dev])
    q = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    print("device", dev.name)

    def build(wm: int, wn: int) -> cl.Program:
        return cl.Program(ctx, SRC).build(options=f"-DWM={wm} -DWN={wn}")

    try:
        prg = build(2, 2)
    except cl.Error as e:
        print("the build failed (inline PTX needs NVIDIA's OpenCL):", e)
        return 1
    ptx = prg.binaries[0][:400].decode(errors="replace")
    print("\n".join(l for l in ptx.splitlines() if l.startswith(".")))

    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((8, 16)).astype(np.float16)
    mf = cl.mem_flags
    A = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a)
    B = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=b)
    C = cl.Buffer(ctx, mf.READ_WRITE, 16 * 8 * 4)
    prg.probe(q, (32,), (32,), A, B, C)
    c = np.empty((16, 8), np.float32)
    cl.enqueue_copy(q, c, C)
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    print("probe max err", np.abs(c - ref).max())

    shapes = MOBILENET_GEMMS[2:-1]  # the pointwise convolutions (M, K, N)
    for wm, wn in [(1, 2), (2, 2), (1, 4), (2, 4)]:
        prg = build(wm, wn)
        tot = 0.0
        line = []
        for M, K, N in shapes:
            a = (rng.standard_normal((M, K)) * 0.5).astype(np.float16)
            b = (rng.standard_normal((N, K)) * 0.1).astype(np.float16)
            bias = rng.standard_normal(N).astype(np.float32)
            A = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a)
            B = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=b)
            Bi = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=bias)
            C = cl.Buffer(ctx, mf.READ_WRITE, M * N * 2)
            gx = -(-N // (16 * wn)) * 128
            gy = -(-M // (32 * wm))
            args = (A, B, Bi, C, np.int32(M), np.int32(N), np.int32(K))
            for _ in range(5):
                prg.tc_gemm(q, (gx, gy), (128, 1), *args)
            ts = []
            for _ in range(30):
                e = prg.tc_gemm(q, (gx, gy), (128, 1), *args)
                e.wait()
                ts.append((e.profile.end - e.profile.start) / 1e3)
            c = np.empty((M, N), np.float16)
            cl.enqueue_copy(q, c, C)
            ref = np.clip(a.astype(np.float32) @ b.astype(np.float32).T + bias, 0, 6)
            err = np.abs(c.astype(np.float32) - ref).max()
            med = float(np.median(ts))
            tot += med
            line.append(f"{M}x{K}x{N} {med:.1f}us err {err:.1e}")
        print(f"WM={wm} WN={wn} total {tot:.1f} us")
        for l in line:
            print("   ", l)
    return 0


if __name__ == "__main__":
    sys.exit(main())
