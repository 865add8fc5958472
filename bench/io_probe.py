"""Ways to move one invoke's input in and output out, timed host to host on an idle queue:
a 602,112-byte float input (MobileNet's 224x224x3), a kernel reading all of it, a 1001-float
output back. Each way runs interleaved with the others, round after round, and each
round checks the output against numpy (a way whose kernel does not see the host's bytes
is reported as wrong, not timed as fast).

python bench/io_probe.py [--device NVIDIA] [--runs 400] [--rounds 4]

Ways:
- pinned: copy into a mapped ALLOC_HOST_PTR array, write it to a device buffer, kernel,
  read into a second pinned array (what the executor does today);
- pageable: write straight from the caller's array, read into a pageable array;
- mapped-in: the kernel reads the ALLOC_HOST_PTR buffer itself, mapped for writing
  (CL_MAP_WRITE_INVALIDATE_REGION) before each copy and unmapped after;
- mapped-out: as pinned, but the kernel writes an ALLOC_HOST_PTR buffer the host maps
  for reading after the kernel;
- split2: the pinned way in two halves, the first half's write flushed while the host
  copies the second.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

N_IN, N_OUT, SPAN = 224 * 224 * 3, 1001, 150
KERNEL = f"""
__kernel void consume(__global const float* x, __global float* y) {{
  int i = get_global_id(0);
  if (i >= {N_OUT}) return;
  float s = 0.0f;
  for (int j = 0; j < {SPAN}; ++j) s += x[i * {SPAN} + j];
  y[i] = s;
}}
__kernel void copy4(__global const float4* src, __global float4* dst, int n4) {{
  for (int i = get_global_id(0); i < n4; i += get_global_size(0)) dst[i] = src[i];
}}
"""


def nv_buffers(lib, ctx, device):
    """Input and output buffers in host memory the GPU reads and writes over the bus
    (cl_nv_create_buffer's CL_MEM_LOCATION_HOST_NV), mapped once; None without it."""
    import pyopencl as cl

    if "cl_nv_create_buffer" not in device.extensions:
        return None
    vp = ctypes.c_void_p
    get = lib.clGetExtensionFunctionAddressForPlatform
    get.restype, get.argtypes = vp, [vp, ctypes.c_char_p]
    addr = get(vp(device.platform.int_ptr), b"clCreateBufferNV")
    if not addr:
        return None
    proto = ctypes.CFUNCTYPE(
        vp,
        vp,
        ctypes.c_uint64,
        ctypes.c_uint64,
        ctypes.c_size_t,
        vp,
        ctypes.POINTER(ctypes.c_int32),
    )
    create = proto(addr)
    err = ctypes.c_int32()
    out = []
    for n in (N_IN, N_OUT):
        h = create(vp(ctx.int_ptr), 1 << 0, 1 << 0, 4 * n, None, ctypes.byref(err))
        if err.value or not h:
            print(f"clCreateBufferNV: {err.value}")
            return None
        out.append(cl.Buffer.from_int_ptr(h, retain=False))
    q = cl.CommandQueue(ctx)
    maps = [
        cl.enqueue_map_buffer(q, b, cl.map_flags.READ | cl.map_flags.WRITE, 0, (n,), np.float32)[0]
        for b, n in zip(out, (N_IN, N_OUT), strict=True)
    ]
    return out[0], out[1], maps[0], maps[1]


def main() -> int:
    import pyopencl as cl

    from delegate_runtime.gpu.opencl.capi import opencl_library
    from delegate_runtime.gpu.opencl.hot_path import HotPath
    from delegate_runtime.gpu.opencl.runtime import select_device

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--runs", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()

    d = select_device(args.device)
    ctx = cl.Context([d])
    q = cl.CommandQueue(ctx)
    prg = cl.Program(ctx, KERNEL).build()
    kernel = prg.consume
    mf = cl.mem_flags
    lib = opencl_library()
    vp, u32, sz = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_size_t
    lib.clEnqueueMapBuffer.restype = vp
    lib.clEnqueueMapBuffer.argtypes = [vp, vp, u32, ctypes.c_uint64, sz, sz, u32, vp, vp, vp]
    lib.clEnqueueUnmapMemObject.argtypes = [vp, vp, vp, u32, vp, vp]
    lib.clSetKernelArg.argtypes = [vp, u32, sz, vp]
    qh = vp(q.int_ptr)

    def buffer(nbytes: int, flags: int) -> cl.Buffer:
        return cl.Buffer(ctx, flags, nbytes)

    def mapped(buf: cl.Buffer, n: int) -> np.ndarray:
        host, _ = cl.enqueue_map_buffer(
            q, buf, cl.map_flags.READ | cl.map_flags.WRITE, 0, (n,), np.float32
        )
        return host

    dev_in, dev_out = buffer(4 * N_IN, mf.READ_WRITE), buffer(4 * N_OUT, mf.READ_WRITE)
    pin_in_buf = buffer(4 * N_IN, mf.READ_WRITE | mf.ALLOC_HOST_PTR)
    pin_out_buf = buffer(4 * N_OUT, mf.READ_WRITE | mf.ALLOC_HOST_PTR)
    pin_in, pin_out = mapped(pin_in_buf, N_IN), mapped(pin_out_buf, N_OUT)
    ahp_in = buffer(4 * N_IN, mf.READ_ONLY | mf.ALLOC_HOST_PTR)
    ahp_out = buffer(4 * N_OUT, mf.WRITE_ONLY | mf.ALLOC_HOST_PTR)
    page_out = np.empty(N_OUT, np.float32)
    gsize = ((N_OUT + 127) // 128 * 128,)
    hot = HotPath(lib, q, [(kernel, gsize, (128,))])
    err = ctypes.c_int32()

    def set_args(x_buf: cl.Buffer, y_buf: cl.Buffer) -> None:
        kernel.set_args(x_buf, y_buf)

    def map_ptr(buf: cl.Buffer, flags: int, nbytes: int) -> int:
        p = lib.clEnqueueMapBuffer(
            qh, vp(buf.int_ptr), 1, flags, 0, nbytes, 0, None, None, ctypes.byref(err)
        )
        if err.value:
            raise RuntimeError(f"clEnqueueMapBuffer {err.value}")
        return p

    def unmap(buf: cl.Buffer, p: int) -> None:
        e = lib.clEnqueueUnmapMemObject(qh, vp(buf.int_ptr), vp(p), 0, None, None)
        if e:
            raise RuntimeError(f"clEnqueueUnmapMemObject {e}")

    def as_array(p: int, n: int) -> np.ndarray:
        return np.ctypeslib.as_array(ctypes.cast(p, ctypes.POINTER(ctypes.c_float)), (n,))

    def pinned(x: np.ndarray) -> np.ndarray:
        np.copyto(pin_in, x)
        hot.write(dev_in, pin_in)
        hot.enqueue(1)
        hot.read(dev_out, pin_out)
        hot.finish()
        return pin_out.copy()

    def pageable(x: np.ndarray) -> np.ndarray:
        hot.write(dev_in, x)
        hot.enqueue(1)
        hot.read(dev_out, page_out)
        hot.finish()
        return page_out.copy()

    def mapped_in(x: np.ndarray) -> np.ndarray:
        p = map_ptr(ahp_in, 1 << 2, 4 * N_IN)  # CL_MAP_WRITE_INVALIDATE_REGION
        np.copyto(as_array(p, N_IN), x)
        unmap(ahp_in, p)
        hot.enqueue(1)
        hot.read(dev_out, pin_out)
        hot.finish()
        return pin_out.copy()

    def mapped_out(x: np.ndarray) -> np.ndarray:
        np.copyto(pin_in, x)
        hot.write(dev_in, pin_in)
        hot.enqueue(1)
        p = map_ptr(ahp_out, 1, 4 * N_OUT)  # CL_MAP_READ, blocking: waits for the kernel
        y = as_array(p, N_OUT).copy()
        unmap(ahp_out, p)
        hot.finish()
        return y

    half = N_IN // 2

    def split2(x: np.ndarray) -> np.ndarray:
        np.copyto(pin_in[:half], x[:half])
        hot.write(dev_in, pin_in[:half])
        lib.clFlush(qh)
        np.copyto(pin_in[half:], x[half:])
        hot.write(dev_in, pin_in[half:], 4 * half)
        hot.enqueue(1)
        hot.read(dev_out, pin_out)
        hot.finish()
        return pin_out.copy()

    copier = prg.copy4
    hot2 = HotPath(lib, q, [(copier, (132 * 4 * 256,), (256,)), (kernel, gsize, (128,))])

    def resident_in(x: np.ndarray) -> np.ndarray:
        np.copyto(pin_in, x)
        hot.enqueue(1)
        hot.read(dev_out, pin_out)
        hot.finish()
        return pin_out.copy()

    def resident_both(x: np.ndarray) -> np.ndarray:
        np.copyto(pin_in, x)
        hot.enqueue(1)
        hot.finish()
        return pin_out.copy()

    def kernel_copy(x: np.ndarray) -> np.ndarray:
        np.copyto(pin_in, x)
        hot2.enqueue(1)
        hot2.read(dev_out, pin_out)
        hot2.finish()
        return pin_out.copy()

    nv = nv_buffers(lib, ctx, d)
    if nv is not None:
        nv_in_buf, nv_out_buf, nv_in, nv_out = nv

    def nvhost_in(x: np.ndarray) -> np.ndarray:
        np.copyto(nv_in, x)
        hot.enqueue(1)
        hot.read(dev_out, pin_out)
        hot.finish()
        return pin_out.copy()

    def nvhost_both(x: np.ndarray) -> np.ndarray:
        np.copyto(nv_in, x)
        hot.enqueue(1)
        hot.finish()
        return nv_out.copy()

    def nvhost_copy(x: np.ndarray) -> np.ndarray:
        np.copyto(nv_in, x)
        hot2.enqueue(1)
        hot2.finish()
        return nv_out.copy()

    ways = {
        "pinned": ((dev_in, dev_out), pinned),
        "pageable": ((dev_in, dev_out), pageable),
        "mapped-in": ((ahp_in, dev_out), mapped_in),
        "mapped-out": ((dev_in, ahp_out), mapped_out),
        "split2": ((dev_in, dev_out), split2),
        "resident-in": ((pin_in_buf, dev_out), resident_in),
        "resident-both": ((pin_in_buf, pin_out_buf), resident_both),
        "kernel-copy": ((dev_in, dev_out), kernel_copy),
    }
    if nv is not None:
        ways["nvhost-in"] = ((nv_in_buf, dev_out), nvhost_in)
        ways["nvhost-both"] = ((nv_in_buf, nv_out_buf), nvhost_both)
        ways["nvhost-copy"] = ((dev_in, nv_out_buf), nvhost_copy)
    copier.set_args(nv_in_buf if nv is not None else pin_in_buf, dev_in, np.int32(N_IN // 4))
    print("extensions:", " ".join(e for e in d.extensions.split() if "nv" in e or "svm" in e))
    print("svm caps:", getattr(d, "svm_capabilities", "?"))
    rng = np.random.default_rng(0)
    xs = [rng.uniform(-1, 1, N_IN).astype(np.float32) for _ in range(2)]
    wants = [x[: N_OUT * SPAN].reshape(N_OUT, SPAN).sum(axis=1) for x in xs]
    times: dict[str, list[float]] = {name: [] for name in ways}
    wrong: dict[str, int] = {name: 0 for name in ways}
    for _ in range(args.rounds):
        for name, (bufs, fn) in ways.items():
            set_args(*bufs)
            for i in range(args.runs + 20):
                x, want = xs[i % 2], wants[i % 2]
                t = time.perf_counter_ns()
                got = fn(x)
                dt = time.perf_counter_ns() - t
                if i >= 20:
                    times[name].append(dt / 1e3)
                if not np.allclose(got, want, rtol=1e-4, atol=1e-3):
                    wrong[name] += 1
    anchor = statistics.median(times["pinned"])
    print(f"io_probe on {d.name}: {args.rounds} rounds x {args.runs} (us, median; ratio to pinned)")
    for name in ways:
        med = statistics.median(times[name])
        p10 = float(np.percentile(times[name], 10))
        print(
            f"  {name:10s} {med:7.1f} us  p10 {p10:7.1f}  pinned/this {anchor / med:5.3f}"
            f"  wrong outputs {wrong[name]}"
        )
    # the copy into pinned memory alone, and numpy's copy between pageable arrays
    dst = np.empty_like(xs[0])
    for label, target in (("copy into pinned", pin_in), ("copy pageable", dst)):
        ts = []
        for i in range(2000):
            t = time.perf_counter_ns()
            np.copyto(target, xs[i % 2])
            ts.append(time.perf_counter_ns() - t)
        print(f"  {label}: {statistics.median(ts[200:]) / 1e3:.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
