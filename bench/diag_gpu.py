"""Where GPU latency goes: context creation, launch cost, one invoke's timeline on the
device clock, input upload paths, each invoke's device time split into copies and kernels,
and sweeps of GEMM tiles and depthwise variants over MobileNet's shapes.

python bench/diag_gpu.py --model MODEL [--device SPEC]
    [--only contexts,launches,enqueue,loops,timeline,upload,copies,sweep,patch,depthwise,fusion,
     split,flush]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def med_us(fn, runs: int = 50) -> float:
    for _ in range(5):
        fn()
    ts = []
    for _ in range(runs):
        t = time.perf_counter_ns()
        fn()
        ts.append(time.perf_counter_ns() - t)
    return statistics.median(ts) / 1e3


def drained_us(prepare, fn, runs: int = 100) -> float:
    """Median time of `fn` alone, each run starting on an idle queue (`prepare` drains)."""
    ts = []
    for _ in range(runs):
        prepare()
        t = time.perf_counter_ns()
        fn()
        ts.append(time.perf_counter_ns() - t)
    return statistics.median(ts[runs // 10 :]) / 1e3


def launch_costs(device: str | None) -> None:
    """30 tiny launches: through pyopencl (an event each) and the C API (no events)."""
    import pyopencl as cl

    from delegate_runtime.gpu.opencl.capi import opencl_library
    from delegate_runtime.gpu.opencl.hot_path import HotPath
    from delegate_runtime.gpu.opencl.runtime import select_device

    d = select_device(device)
    ctx = cl.Context([d])
    q = cl.CommandQueue(ctx)
    prg = cl.Program(ctx, "__kernel void k(__global float* x) { x[get_global_id(0)] += 1.0f; }")
    prg = prg.build()
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4 * 1024)
    kern = cl.Kernel(prg, "k")
    kern.set_args(buf)
    n = 30
    hot = HotPath(opencl_library(), q, [(kern, (1024,), (128,))] * n)

    def pyopencl_enqueue():
        for i in range(n):
            cl.enqueue_nd_range_kernel(q, kern, (1024,), (128,))
            if i % 6 == 0:
                q.flush()

    def both(enqueue):
        def run():
            enqueue()
            q.finish()

        return run

    for name, enqueue in (("pyopencl", pyopencl_enqueue), ("C API", lambda: hot.enqueue(6))):
        print(
            f"{n} tiny launches via {name}: enqueue only {drained_us(q.finish, enqueue):7.1f} us, "
            f"with finish {drained_us(q.finish, both(enqueue)):7.1f} us"
        )


def timeline(model: str, device: str | None, precision: str = "fp32") -> None:
    """One invoke's commands on the device clock: when the host enqueued each (queued) and
    when the device ran it, so host-bound stretches show as start == queued."""
    import pyopencl as cl

    from delegate_runtime import load_model
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.opencl.executor import pyopencl_kernel

    m = load_model(model)
    t = m.main.tensors[m.main.inputs[0]]
    x = np.random.default_rng(0).uniform(-1, 1, t.shape).astype(np.float32)
    s = GpuSession(m, precision=precision, device=device, log=io.StringIO(), profiling=True)
    ex, q = s.executors[0], s.queue
    dst, dst_at = ex.destinations[0]
    t_out = ex.outputs[0]
    src, src_at = ex.sources[0]
    out = np.empty(
        s.model.main.tensors[t_out].size, np.float32 if t_out in ex.staging else ex.storage
    )
    for _ in range(20):
        s.invoke([x])
    walls = []
    for _ in range(20):
        q.finish()
        h0 = time.perf_counter_ns()
        copy_in = cl.enqueue_copy(q, dst, x, dst_offset=dst_at, is_blocking=False)
        events = [("copy in", copy_in, "")]
        for i, (kernel, g, lsz) in enumerate(ex.kernels):
            shape = f"{tuple(g)}/{tuple(lsz) if lsz else '-'}"
            events.append(
                (
                    kernel.function_name,
                    cl.enqueue_nd_range_kernel(q, pyopencl_kernel(kernel), g, lsz),
                    shape,
                )
            )
            if i % 6 == 0:
                q.flush()
        copy_out = cl.enqueue_copy(q, out, src, src_offset=src_at, is_blocking=False)
        events.append(("read out", copy_out, ""))
        q.finish()
        walls.append((time.perf_counter_ns() - h0) / 1e3)
    base = events[0][1].profile.queued
    print(
        f"\ntimeline {precision}: host wall {walls[-1]:.1f} us (median of 20 {statistics.median(walls):.1f})"
    )
    print(
        f"{'command':24s} {'queued':>8s} {'submit':>8s} {'start':>8s} {'end':>8s} {'run':>6s} {'gap':>6s}"
        "  global/local"
    )
    prev_end = None
    for name, e, shape in events:
        p = e.profile
        gap = (p.start - prev_end) / 1e3 if prev_end else 0.0
        print(
            f"{name:24s} {(p.queued - base) / 1e3:8.1f} {(p.submit - base) / 1e3:8.1f} "
            f"{(p.start - base) / 1e3:8.1f} {(p.end - base) / 1e3:8.1f} "
            f"{(p.end - p.start) / 1e3:6.1f} {gap:6.1f}  {shape}"
        )
        prev_end = p.end


def enqueue_costs(model: str, device: str | None, runs: int = 100) -> None:
    """What the host spends enqueueing each of a model's launches (the driver's call with
    ctypes around it, no events): median over `runs` launches of that kernel back to
    back, beside its argument counts; then the whole list, alone and with the finish."""
    from delegate_runtime import load_model
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.opencl.launch import Buf, Const, Counters, Scratch

    s = GpuSession(load_model(model), device=device, log=io.StringIO())
    ex = s.executors[0]
    hot = ex.hot
    if hot is None:
        print("enqueue: no OpenCL C library; the delegate enqueues through pyopencl")
        return
    print(f"\nenqueue {s.device_info.name}: host us per launch, median of {runs} back to back")
    for i, launch in enumerate(ex.launches):
        buffers = sum(isinstance(a, (Buf, Const, Scratch, Counters)) for a in launch.args)
        times = []
        for _ in range(runs):
            t = time.perf_counter_ns()
            hot.launch(i)
            times.append(time.perf_counter_ns() - t)
        hot.finish()
        print(
            f"  {launch.kernel:22s} {len(launch.args):3d} args {buffers:3d} buffers "
            f"{statistics.median(times) / 1e3:6.1f} us"
        )

    def whole() -> tuple[float, float]:
        t = time.perf_counter_ns()
        hot.enqueue(6)
        queued = time.perf_counter_ns() - t
        hot.finish()
        return queued / 1e3, (time.perf_counter_ns() - t) / 1e3

    for _ in range(30):
        whole()
    rows = [whole() for _ in range(300)]
    queued, done = (statistics.median(r[i] for r in rows) for i in (0, 1))
    n = len(hot.launches)
    print(
        f"  all {n} launches: enqueued in {queued:.1f} us ({queued / n:.2f} a launch), "
        f"finished {done:.1f} us after the first"
    )


def loops(model: str, device: str | None, runs: int = 400) -> None:
    """The same session's launches enqueued by the Python loop and by the C loop
    (launch_loop.c), interleaved in rounds: whole-invoke medians."""
    from bench_gpu import interleaved_ms

    from delegate_runtime import load_model
    from delegate_runtime.gpu.delegate import GpuSession

    m = load_model(model)
    s = GpuSession(m, device=device, log=io.StringIO())
    hots = [ex.hot for ex in s.executors if ex.hot is not None]
    natives = [h._native for h in hots]
    if not hots or natives[0] is None:
        print(f"loops: one loop only here ({s.launch_loop}: {s.launch_loop_why})")
        return
    t = m.main.tensors[m.main.inputs[0]]
    x = np.random.default_rng(0).uniform(-1, 1, t.shape).astype(np.float32)

    def variant(in_c: bool):
        def step():
            for h, native in zip(hots, natives, strict=True):
                h._native = native if in_c else None
            s.invoke([x])

        return step

    stats = interleaved_ms({"python": variant(False), "c": variant(True)}, runs)
    base = stats["python"][0]
    print(f"\nloops on {Path(model).name} ({sum(len(h.launches) for h in hots)} launches):")
    for name, (median, lo, hi) in stats.items():
        print(f"  {name:8s} {median:7.3f} ms (p10-p90 {lo:.3f}-{hi:.3f})  {base / median:.3f}x")


def phases(model: str, device: str | None, precision: str, runs: int = 600) -> None:
    """Where one invoke's host time goes (a model of one input and one output, one GPU
    partition): the copy into the pinned input, enqueueing the write, the launches and the
    read, waiting in finish, converting the output, each step as the executor takes it;
    and the whole session.invoke, in the same loop. Medians of `runs`, us."""
    from delegate_runtime import load_model
    from delegate_runtime.gpu.delegate import GpuSession

    m = load_model(model)
    s = GpuSession(m, precision=precision, device=device, log=io.StringIO())
    ex = s.executors[0]
    if len(s.executors) != 1 or ex.hot is None or len(ex.input_tensors) != 1 or not ex.pinned:
        print(f"phases: {Path(model).name} needs one GPU partition, one input, a GPU")
        return
    t_in, t_out = ex.input_tensors[0], ex.outputs[0]
    x = np.random.default_rng(0).uniform(-1, 1, m.main.tensors[t_in].shape)
    x = x.astype(np.float32)
    pinned_in, host_out = ex.pinned[t_in], ex._output_host(t_out)
    (dst, dst_at), (src, src_at) = ex.destinations[0], ex.sources[0]
    hot, clock = ex.hot, time.perf_counter_ns
    rows = []
    for _ in range(runs + 100):
        t = [clock()]
        np.copyto(pinned_in, x)
        t.append(clock())
        hot.write(dst, pinned_in, dst_at)
        t.append(clock())
        hot.enqueue(ex.switches.flush_every)
        t.append(clock())
        hot.read(src, host_out, src_at)
        t.append(clock())
        hot.finish()
        t.append(clock())
        ex._from_storage(t_out, host_out)
        t.append(clock())
        s.invoke([x])
        t.append(clock())
        rows.append(np.diff(t) / 1e3)
    med = np.median(np.array(rows[100:]), axis=0)
    names = ("pinned copy", "write", f"{len(hot.launches)} launches", "read", "finish wait")
    steps = ", ".join(f"{n} {v:.1f}" for n, v in zip((*names, "output"), med[:6], strict=True))
    print(
        f"phases {Path(model).name} {precision} (us, median of {runs}): {steps}; "
        f"their sum {med[:6].sum():.1f}; session.invoke {med[6]:.1f}"
    )


def upload_paths(device: str | None) -> None:
    """A 602 KB input to the device, then finish: pageable memory through pyopencl and the
    C API; from a mapped ALLOC_HOST_PTR (pinned) region, as NVIDIA's guide advises."""
    import pyopencl as cl

    from delegate_runtime.gpu.opencl.capi import opencl_library
    from delegate_runtime.gpu.opencl.hot_path import HotPath
    from delegate_runtime.gpu.opencl.runtime import select_device

    d = select_device(device)
    ctx = cl.Context([d])
    q = cl.CommandQueue(ctx)
    hot = HotPath(opencl_library(), q, [])
    host = np.random.rand(1, 224, 224, 3).astype(np.float32)
    dev = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, host.nbytes)
    mf = cl.mem_flags
    pinned = cl.Buffer(ctx, mf.READ_ONLY | mf.ALLOC_HOST_PTR, host.nbytes)
    mapped, _ = cl.enqueue_map_buffer(q, pinned, cl.map_flags.WRITE, 0, host.shape, host.dtype)

    def pageable():
        cl.enqueue_copy(q, dev, host, is_blocking=False)
        q.finish()

    def capi_pageable():
        hot.write(dev, host)
        hot.finish()

    def capi_pinned():
        np.copyto(mapped, host)
        hot.write(dev, mapped)
        hot.finish()

    print(
        f"upload: pyopencl pageable {med_us(pageable):.1f} us; C API pageable "
        f"{med_us(capi_pageable):.1f} us; C API from pinned (memcpy included) "
        f"{med_us(capi_pinned):.1f} us; the memcpy alone {med_us(lambda: np.copyto(mapped, host)):.1f} us"
    )


#: GEMM variants swept: name -> (tile, work per item, k step).
SWEEP_GEMMS = {
    "t32w2k32": (32, 2, 32),
    "t32w2k64": (32, 2, 64),
    "t64w4k16": (64, 4, 16),
    "t64w4k32": (64, 4, 32),
    "t64w4k64": (64, 4, 64),
    "t32w4k32": (32, 4, 32),
    "t32w4k64": (32, 4, 64),
    "t64w8k32": (64, 8, 32),
    "t128w8k16": (128, 8, 16),
    "t16w2k64": (16, 2, 64),
}
#: MobileNet v1's pointwise GEMMs (M, K, N) and its logits layer, after two of almost no
#: arithmetic (what a GEMM launch costs whatever its work).
MOBILENET_GEMMS = [
    (1, 4, 4),
    (12544, 4, 64),
    (12544, 32, 64),
    (3136, 64, 128),
    (3136, 128, 128),
    (784, 128, 256),
    (784, 256, 256),
    (196, 256, 512),
    (196, 512, 512),
    (49, 512, 1024),
    (49, 1024, 1024),
    (1, 1024, 1001),
]
#: The anchors each GEMM shape is timed beside: a launch that does nothing, and a copy
#: moving the GEMM's bytes (A in, C out), the memory-bound floor.
ANCHOR_SOURCE = """
__kernel void anchor_empty(__global store_t* c) {}
__kernel void anchor_copy(__global const store_t* a, __global store_t* c, int na, int nc) {
  int i = get_global_id(0);
  float v = i < na ? LDF(a, i) : 0.0f;
  if (i < nc) ST(c, i, v);
}
"""


def device_us(q: Any, kernel: Any, gsize: tuple, lsize: tuple, runs: int) -> float:
    """Median device-clock run time of `kernel` over `runs` launches queued back to back
    (the first sixth is warm-up)."""
    import pyopencl as cl

    events = []
    for i in range(runs):
        events.append(cl.enqueue_nd_range_kernel(q, kernel, gsize, lsize))
        if i % 4 == 3:
            q.flush()
    q.finish()
    return statistics.median((e.profile.end - e.profile.start) / 1e3 for e in events[runs // 6 :])


def wall_us(q: Any, kernel: Any, gsize: tuple, lsize: tuple, launches: int = 200) -> float:
    """Host wall time per launch of `kernel` launched `launches` times back to back through
    the C API (no events: the inference path), queue drained before and after."""
    from delegate_runtime.gpu.opencl.capi import opencl_library
    from delegate_runtime.gpu.opencl.hot_path import HotPath

    hot = HotPath(opencl_library(), q, [(kernel, gsize, lsize)] * launches)
    hot.enqueue(6)
    hot.finish()
    times = []
    for _ in range(5):
        t = time.perf_counter_ns()
        hot.enqueue(6)
        hot.finish()
        times.append((time.perf_counter_ns() - t) / 1e3 / launches)
    return statistics.median(times)


def gemm_sweep(device: str | None, precision: str, runs: int = 30) -> None:
    """Device time of every GEMM tile and K split on MobileNet's GEMM shapes, beside the
    empty and copy anchors, and the variant and split lowering picks (gemm_plan)."""
    import pyopencl as cl

    from delegate_runtime.gpu.opencl import gemm_lowering, program
    from delegate_runtime.gpu.opencl.launch import round_up
    from delegate_runtime.gpu.opencl.records.gemm_kernel import GEMM_VARIANTS
    from delegate_runtime.gpu.opencl.runtime import describe, select_device

    d = select_device(device)
    info = describe(d)
    ctx = cl.Context([d])
    q = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    plain_q = cl.CommandQueue(ctx)  # for wall times: no timestamps taken
    picks = {name: (f"t{ts}w{w}k{tk}", (ts, w, tk)) for name, (ts, w, tk) in GEMM_VARIANTS.items()}
    variants = {**SWEEP_GEMMS, **dict(picks.values())}
    source = program.program_source(variants) + ANCHOR_SOURCE
    prg = cl.Program(ctx, source).build(options=program.build_options(precision, info))
    storage = np.float16 if precision == "fp16" else np.float32
    rng = np.random.default_rng(0)
    mf = cl.mem_flags
    print(f"\nGEMM sweep, {precision}, {info.name}: median device us over {runs} launches")
    for m, k, n in MOBILENET_GEMMS:
        a = rng.uniform(-1, 1, (m, k)).astype(storage)
        b = rng.uniform(-1, 1, (k, n)).astype(storage)
        bias = rng.uniform(-1, 1, n).astype(storage)
        want = a.astype(np.float32) @ b.astype(np.float32) + bias.astype(np.float32)
        bufs = [cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=h) for h in (a, b, bias)]
        c_buf = cl.Buffer(ctx, mf.READ_WRITE, m * n * storage().itemsize)
        p_buf = cl.Buffer(ctx, mf.READ_WRITE, 4 * 32 * m * n)
        cnt = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=np.zeros(65536, np.int32))
        empty, copy = cl.Kernel(prg, "anchor_empty"), cl.Kernel(prg, "anchor_copy")
        empty.set_args(c_buf)
        copy.set_args(bufs[0], c_buf, np.int32(m * k), np.int32(m * n))
        span = round_up(max(m * k, m * n), 256)
        t_empty = device_us(q, empty, (64,), (64,), runs)
        t_copy = device_us(q, copy, (span,), (256,), runs)
        # the kernel's arguments past its buffers: no input scale (ascale, scaled, snap) and
        # an epilogue of no activation and three STEP_NONE steps (common.cl's EPILOGUE_PARAMS)
        unscaled = [bufs[2], np.int32(0), np.zeros(4, np.float32)]
        step_none = [np.zeros(2, np.int32), bufs[2], np.zeros(4, np.float32)]
        no_epilogue = [np.int32(0), *step_none * 3]
        suffix = "v" if k % 4 == 0 and n % 4 == 0 else ""
        timed: dict[tuple[str, int], tuple[float, float]] = {}
        launches: dict[tuple[str, int], tuple[Any, tuple, tuple]] = {}
        for base, (ts, wpt, tk) in variants.items():
            lsz = (ts // wpt, ts // wpt, 1)
            for splits in (1, 2, 4, 8, 16, 32):
                kps = round_up(-(-k // splits), tk)
                if -(-k // kps) != splits:
                    continue
                kern = cl.Kernel(prg, base + suffix)
                g = (-(-n // ts) * lsz[0], -(-m // ts) * lsz[1], splits)
                args = [
                    *bufs,
                    c_buf,
                    p_buf,
                    cnt,
                    *unscaled,
                    *map(np.int32, (m, n, k, kps, k, n, 0)),
                ]
                kern.set_args(*args, *no_epilogue)
                launches[base, splits] = (kern, g, lsz)
                t = device_us(q, kern, g, lsz, runs)
                got = np.empty((m, n), storage)
                cl.enqueue_copy(q, got, c_buf)
                err = float(np.abs(got.astype(np.float32) - want).max())
                timed[base, splits] = (t, err)
        ranked = sorted(timed.items(), key=lambda kv: kv[1][0])
        pick_name, pick_splits, _ = gemm_lowering.gemm_plan(m, n, k, info.compute_units)
        pick = (picks[pick_name][0], pick_splits)
        t_pick = timed[pick][0]
        walls = (
            wall_us(plain_q, empty, (64,), (64,)),
            wall_us(plain_q, copy, (span,), (256,)),
            wall_us(plain_q, *launches[pick]),
        )
        print(
            f"GEMM {m}x{k}x{n}: empty {t_empty:.1f} us, copy {t_copy:.1f} us; picked {pick[0]} "
            f"s{pick[1]} {t_pick:.1f} us ({t_pick / t_copy:.2f}x copy); best "
            + "; ".join(f"{nm} s{sp} {t:.1f}" for (nm, sp), (t, _) in ranked[:4])
            + "\n    wall per launch, no events (empty, copy, picked): "
            + ", ".join(f"{w:.1f}" for w in walls)
            + " us"
        )
        tol = (0.05 if precision == "fp16" else 1e-3) * max(1, k / 64)
        bad = [(key, err) for key, (_, err) in timed.items() if err > tol]
        if bad:
            print("   WRONG:", bad[:3])


def model_convolutions(model: str) -> list[tuple[tuple[int, ...], ...]]:
    """The CONV_2D layers of `model` other than 1x1 GEMMs, each once: (input shape,
    filter shape OHWI, output shape, options as (key, value) pairs)."""
    from delegate_runtime import load_model
    from delegate_runtime.gpu.opencl.records import conv

    sg = load_model(model).main
    layers = []
    for op in sg.operators:
        if op.op != "CONV_2D" or conv.is_gemm(op, sg):
            continue
        keys = ("padding", "stride_h", "stride_w", "dilation_h_factor", "dilation_w_factor")
        options = tuple((k, op.options[k]) for k in keys if k in op.options)
        shapes = [sg.tensors[t].shape for t in (op.inputs[0], op.inputs[1], op.outputs[0])]
        layer = (*shapes, options)
        if layer not in layers:
            layers.append(layer)
    return layers


def patch_sweep(model: str, device: str | None, precision: str, runs: int = 30) -> None:
    """Each convolution of `model` other than a 1x1 (float32, random weights, alone in a
    model of its own) as the patch GEMM and as the direct convolution (as_patch_gemm
    turned off): median device time and the outputs' largest difference."""
    from unittest import mock

    from delegate_runtime import read_model
    from delegate_runtime.builder import ModelBuilder
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.opencl.records import conv

    rng = np.random.default_rng(0)
    print(f"\n{Path(model).name} convolutions, {precision}: median device us over {runs} invokes")
    for x_shape, w_shape, y_shape, pairs in model_convolutions(model):
        options = dict(pairs)
        _, h, w, c = x_shape
        _, oh, ow, _ = y_shape
        oc, kh, kw, _ = w_shape
        b = ModelBuilder()
        g = b.main
        x = g.input("x", x_shape, np.float32)
        scale = 1 / np.sqrt(kh * kw * c)
        weights = g.const("w", rng.uniform(-scale, scale, w_shape).astype(np.float32))
        bias = g.const("b", rng.uniform(-1, 1, oc).astype(np.float32))
        sh, sw = options.get("stride_h", 1), options.get("stride_w", 1)
        dh, dw = options.get("dilation_h_factor", 1), options.get("dilation_w_factor", 1)
        y = g.tensor("y", y_shape, np.float32)
        g.op("CONV_2D", [x, weights, bias], [y], **options)
        g.output(y)
        one = read_model(b.build())
        xs = [rng.uniform(-1, 1, x_shape).astype(np.float32)]
        times, outs = {}, {}
        for mode in ("patch GEMM", "direct"):
            direct_only = mock.patch.object(conv, "as_patch_gemm", lambda *a: False)
            with direct_only if mode == "direct" else contextlib.nullcontext():
                s = GpuSession(
                    one, precision=precision, device=device, log=io.StringIO(), profiling=True
                )
            samples = []
            for _ in range(runs):
                outs[mode] = s.invoke(xs)[0]
                samples.append(s.op_profile_ns()[0] / 1e3)
            times[mode] = statistics.median(samples[runs // 6 :])
        d = float(np.abs(outs["patch GEMM"] - outs["direct"]).max())
        window = f"{kh}x{kw}" + (f" dilation {dh}x{dw}" if (dh, dw) != (1, 1) else "")
        print(
            f"  {h}x{w}x{c} window {window} stride {sh}x{sw} -> {oh}x{ow}x{oc} "
            f"(K {kh * kw * c}): patch GEMM {times['patch GEMM']:.1f} us, "
            f"direct {times['direct']:.1f} us, max |d| {d:.2g}"
        )


#: MobileNet v1's depthwise layers: (input size, channels, stride).
MOBILENET_DEPTHWISE = [
    (112, 32, 1),
    (112, 64, 2),
    (56, 128, 1),
    (56, 128, 2),
    (28, 256, 1),
    (28, 256, 2),
    (14, 512, 1),
    (14, 512, 2),
    (7, 1024, 1),
]


def depthwise_sweep(device: str | None, precision: str, runs: int = 30) -> None:
    """Device time of the 3x3 depthwise kernels (columns per item, float or storage-typed
    filters) on MobileNet's depthwise shapes."""
    import pyopencl as cl

    from delegate_runtime.gpu.opencl import program
    from delegate_runtime.gpu.opencl.launch import grid3
    from delegate_runtime.gpu.opencl.runtime import describe, select_device

    d = select_device(device)
    info = describe(d)
    ctx = cl.Context([d])
    q = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    template = (Path(program.__file__).parent / "depthwise3x3.cl.in").read_text()
    variants = {}
    for sw in (1, 2):
        for xt in (1, 2, 4):
            for p_t, ld in (("store_t", "LD4"), ("float", "LD4F")):
                name = f"dw_s{sw}x{xt}_{'f32' if p_t == 'float' else 'st'}"
                subs = {"@NAME@": name, "@SW@": str(sw), "@XT@": str(xt)}
                text = template.replace("weight_t", p_t).replace("LDW4", ld)
                for key, value in subs.items():
                    text = text.replace(key, value)
                variants[name] = (sw, xt, p_t == "float", text)
    source = program.program_source() + "\n".join(v[3] for v in variants.values())
    prg = cl.Program(ctx, source).build(options=program.build_options(precision, info))
    storage = np.float16 if precision == "fp16" else np.float32
    rng = np.random.default_rng(0)
    mf = cl.mem_flags
    for size, c, stride in MOBILENET_DEPTHWISE:
        oh = -(-size // stride)
        pad = max((oh - 1) * stride + 3 - size, 0) // 2
        x = rng.uniform(-1, 1, (1, size, size, c)).astype(storage)
        w = rng.uniform(-1, 1, (3, 3, c)).astype(storage)
        b = rng.uniform(-1, 1, c).astype(storage)
        xp = np.pad(x.astype(np.float32), ((0, 0), (pad, 3), (pad, 3), (0, 0)))
        want = np.zeros((1, oh, oh, c), np.float32) + b.astype(np.float32)
        for ky in range(3):
            for kx in range(3):
                tap = xp[:, ky : ky + stride * oh : stride, kx : kx + stride * oh : stride]
                want += tap[:, :oh, :oh] * w[ky, kx].astype(np.float32)
        x_buf = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
        params = {
            False: [cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=h) for h in (w, b)],
            True: [
                cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=h.astype(np.float32))
                for h in (w, b)
            ],
        }
        out = cl.Buffer(ctx, mf.READ_WRITE, want.size * storage().itemsize)
        in_s = np.array([1, size, size, c], np.int32)
        out_s = np.array([1, oh, oh, c], np.int32)
        results = []
        for name in ["depthwise3x3_c4", *[v for v in variants if variants[v][0] == stride]]:
            kern = cl.Kernel(prg, name)
            if name == "depthwise3x3_c4":
                g, lsz = grid3(c // 4, oh, oh)
                scalars = (stride, stride, pad, pad, 0)
                kern.set_args(x_buf, *params[False], out, in_s, out_s, *map(np.int32, scalars))
            else:
                _, xt, as_float, _ = variants[name]
                g, lsz = grid3(c // 4, -(-oh // xt), oh)
                scalars = (stride, pad, pad, 0)
                kern.set_args(x_buf, *params[as_float], out, in_s, out_s, *map(np.int32, scalars))
            times = []
            for _ in range(runs):
                e = cl.enqueue_nd_range_kernel(q, kern, g, lsz)
                e.wait()
                times.append((e.profile.end - e.profile.start) / 1e3)
            got = np.empty(want.shape, storage)
            cl.enqueue_copy(q, got, out)
            err = float(np.abs(got.astype(np.float32) - want).max())
            results.append((statistics.median(times[runs // 6 :]), name, err))
        base = [r for r in results if r[1] == "depthwise3x3_c4"][0]
        results.sort()
        print(
            f"depthwise {size}x{size}x{c} s{stride} {precision}: c4 {base[0]:.1f}us | "
            + "; ".join(f"{nm} {t:.1f}us err {e:.2g}" for t, nm, e in results[:4])
        )


def context_costs(device: str | None) -> None:
    """Creating two OpenCL contexts for one device in one process (run in a fresh one)."""
    import pyopencl as cl

    from delegate_runtime.gpu.opencl.runtime import select_device

    t0 = time.perf_counter()
    d = select_device(device)
    t1 = time.perf_counter()
    first = cl.Context([d])
    t2 = time.perf_counter()
    second = cl.Context([d])
    t3 = time.perf_counter()
    print(
        f"contexts: platform and device lookup {1e3 * (t1 - t0):.1f} ms, first context "
        f"{1e3 * (t2 - t1):.1f} ms, second context {1e3 * (t3 - t2):.1f} ms"
    )
    del first, second


def copies(model: str, device: str | None, runs: int = 1500) -> None:
    """Each invoke's device timeline split by step with markers (input copy, kernels,
    output copy), for pinned and pageable host arrays on each side; slow invokes (device
    span >= 470 us) show which step grows and which host memory causes it."""
    import ctypes

    import pyopencl as cl

    from delegate_runtime import load_model
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.opencl.hot_path import HotPath

    m = load_model(model)
    x = np.random.default_rng(0).uniform(-1, 1, m.main.tensors[m.main.inputs[0]].shape)
    x = x.astype(np.float32)
    s = GpuSession(m, device=device, log=io.StringIO())
    ex = s.executors[0]
    q = cl.CommandQueue(s.ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    hot = HotPath(ex.hot.lib, q, ex.kernels)
    lib, vp = hot.lib, ctypes.c_void_p
    lib.clEnqueueMarkerWithWaitList.argtypes = [vp, ctypes.c_uint32, vp, ctypes.POINTER(vp)]
    lib.clGetEventProfilingInfo.argtypes = [vp, ctypes.c_uint32, ctypes.c_size_t, vp, vp]
    lib.clReleaseEvent.argtypes = [vp]
    if not (ex.pinned and ex.pinned_out):
        print(f"copies: {s.device_info.name} is not a GPU; the delegate pins nothing there")
        return
    (src, src_at), (dst, dst_at) = ex.sources[0], ex.destinations[0]
    pinned_in, pinned_out = ex.pinned[ex.input_tensors[0]], ex.pinned_out[ex.outputs[0]]

    def marker() -> Any:
        ev = vp()
        lib.clEnqueueMarkerWithWaitList(hot.queue, 0, None, ctypes.byref(ev))
        return ev

    def stamp(ev: Any, what: int) -> float:
        v = ctypes.c_uint64()
        lib.clGetEventProfilingInfo(ev, what, 8, ctypes.byref(v), None)
        return v.value / 1e3

    def invoke(host_in: np.ndarray, host_out: np.ndarray) -> list[float]:
        np.copyto(host_in, x)
        marks = [marker()]
        hot.write(dst, host_in, dst_at)
        marks.append(marker())
        hot.enqueue(6)
        marks.append(marker())
        hot.read(src, host_out, src_at)
        marks.append(marker())
        hot.finish()
        t = [stamp(marks[0], 0x1282)] + [stamp(e, 0x1283) for e in marks[1:]]
        for e in marks:
            lib.clReleaseEvent(e)
        return [t[1] - t[0], t[2] - t[1], t[3] - t[2], t[3] - t[0]]

    sides = {
        "pinned": (pinned_in, pinned_out),
        "pageable": (np.empty_like(pinned_in), np.empty_like(pinned_out)),
    }
    for side_in, side_out in (("pinned", "pageable"), ("pinned", "pinned"), ("pageable", "pinned")):
        host_in, host_out = sides[side_in][0], sides[side_out][1]
        rows = np.array([invoke(host_in, host_out) for _ in range(runs + 100)][100:])
        slow = rows[:, 3] >= 470
        print(
            f"copies {side_in} in, {side_out} out: device span median {np.median(rows[:, 3]):.1f} us, "
            f"slow {slow.sum()} of {len(rows)}"
        )
        for name, group in (("fast", rows[~slow]), ("slow", rows[slow])):
            if len(group):
                med = np.median(group, axis=0)
                print(
                    f"  {name}: input copy {med[0]:.1f} us, kernels {med[1]:.1f} us, "
                    f"output copy {med[2]:.1f} us, span {med[3]:.1f} us"
                )


def fusion(model: str, device: str | None, runs: int = 300) -> None:
    """Each fused kernel with the nodes it covers, then the model with and without fusion:
    launches and median latency, interleaved, per precision."""
    from unittest import mock

    from bench_gpu import interleaved_ms

    from delegate_runtime import load_model
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.opencl import lowering

    m = load_model(model)
    t = m.main.tensors[m.main.inputs[0]]
    x = np.random.default_rng(0).uniform(-1, 1, t.shape).astype(np.float32)
    steps, outs = {}, {}
    for precision in ("fp32", "fp16"):
        for fused in (True, False):
            with mock.patch.object(
                lowering, "plan_fusion", lowering.plan_fusion if fused else (lambda *a: {})
            ):
                s = GpuSession(m, precision=precision, device=device, log=io.StringIO())
            name = f"{precision} {'fused' if fused else 'unfused'}"
            steps[name] = lambda s=s: s.invoke([x])
            outs[name] = (s, s.invoke([x])[0], sum(len(e.kernels) for e in s.executors))
    ops = outs["fp32 fused"][0].model.main.operators
    print(f"\nfused kernels of {Path(model).name} (producer first):")
    for producer, covers in sorted(outs["fp32 fused"][0].fused_kernels().items()):
        print(f"  #{producer:<4d} " + " + ".join(f"{ops[n].op} #{n}" for n in covers))
    stats = interleaved_ms(steps, runs)
    print(f"\n{'variant':16s} {'kernels':>8s} {'median ms':>10s} {'max |d| vs unfused':>20s}")
    for name, (median, _, _) in stats.items():
        s, out, kernels = outs[name]
        ref = outs[name.split()[0] + " unfused"][1]
        d = float(np.abs(out.astype(np.float64) - ref).max())
        print(f"{name:16s} {kernels:8d} {median:10.3f} {d:20.3g}")


def gemm_split(model: str, device: str | None, runs: int = 300) -> None:
    """Whole-model latency for each split-K setting of the GEMM (work groups wanted per
    compute unit before K is split; 0: never split), interleaved, fp32."""
    from bench_gpu import interleaved_ms

    from delegate_runtime import load_model
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.switches import Switches

    m = load_model(model)
    t = m.main.tensors[m.main.inputs[0]]
    x = np.random.default_rng(0).uniform(-1, 1, t.shape).astype(np.float32)
    steps, outs = {}, {}
    for per_cu in (0, 1, 2, 4, 8):
        never = per_cu == 0
        base = Switches.from_env()
        switches = base.replace(
            gemm_groups_per_cu=max(per_cu, 1),
            min_split_steps=1 << 30 if never else base.min_split_steps,
            min_computed_split_k=1 << 30 if never else base.min_computed_split_k,
        )
        s = GpuSession(m, device=device, log=io.StringIO(), switches=switches)
        steps[f"groups/CU {per_cu}"] = lambda s=s: s.invoke([x])
        outs[f"groups/CU {per_cu}"] = s.invoke([x])[0]
    stats = interleaved_ms(steps, runs)
    ref = outs["groups/CU 4"]
    print(f"\nGEMM split-K settings on {Path(model).name} (0: no split):")
    for name, (median, lo, hi) in stats.items():
        d = float(np.abs(outs[name].astype(np.float64) - ref).max())
        print(f"  {name:14s} {median:8.3f} ms (p10-p90 {lo:.3f}-{hi:.3f}) max |d| {d:.3g}")


def flush_intervals(model: str, device: str | None, runs: int = 400) -> None:
    """One session's invoke with the queue flushed every N launches (the switches'
    flush_every, changed on the session's executors between invokes), for several N,
    interleaved in rounds: whole-invoke medians, fp32 and fp16."""
    from bench_gpu import interleaved_ms

    from delegate_runtime import load_model

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_zoo import inputs_for

    xs = inputs_for(model)
    for precision in ("fp32", "fp16"):
        from delegate_runtime.gpu.delegate import GpuSession

        s = GpuSession(load_model(model), precision, device, io.StringIO())
        shipped = s.switches.flush_every

        def every(n: int, session: Any = s):
            def step():
                for ex in session.executors:
                    ex.switches = session.switches.replace(flush_every=n)
                session.invoke(xs)

            return step

        intervals = (1, 3, shipped, 12, 24, 48, 1_000_000)
        stats = interleaved_ms({str(n): every(n) for n in intervals}, runs)
        launches = sum(len(ex.kernels) for ex in s.executors)
        print(f"\nflush intervals on {Path(model).name} ({precision}, {launches} launches):")
        base = stats[str(shipped)][0]
        for name, (median, lo, hi) in stats.items():
            print(
                f"  every {name:>7s} {median:7.3f} ms (p10-p90 {lo:.3f}-{hi:.3f})  {base / median:.3f}x"
            )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--device", default=None)
    ap.add_argument("--runs", type=int, default=30, help="launches per GEMM variant")
    ap.add_argument("--invokes", type=int, default=1500, help="invocations for --only copies")
    ap.add_argument(
        "--only",
        default="",
        help="comma list: contexts,launches,enqueue,loops,phases,timeline,upload,copies,sweep,patch,"
        "depthwise,fusion,split,flush",
    )
    a = ap.parse_args()
    what = a.only.split(",") if a.only else ["launches", "timeline", "upload", "sweep"]
    if "contexts" in what:
        context_costs(a.device)
    if "copies" in what:
        copies(a.model, a.device, a.invokes)
    if "launches" in what:
        launch_costs(a.device)
    if "enqueue" in what:
        enqueue_costs(a.model, a.device)
    if "loops" in what:
        loops(a.model, a.device)
    if "phases" in what:
        phases(a.model, a.device, "fp32", a.invokes)
        phases(a.model, a.device, "fp16", a.invokes)
    if "timeline" in what:
        timeline(a.model, a.device, "fp32")
        timeline(a.model, a.device, "fp16")
    if "upload" in what:
        upload_paths(a.device)
    if "sweep" in what:
        gemm_sweep(a.device, "fp32", a.runs)
        gemm_sweep(a.device, "fp16", a.runs)
    if "fusion" in what:
        fusion(a.model, a.device)
    if "split" in what:
        gemm_split(a.model, a.device)
    if "patch" in what:
        patch_sweep(a.model, a.device, "fp32", a.runs)
    if "flush" in what:
        flush_intervals(a.model, a.device)
    if "depthwise" in what:
        depthwise_sweep(a.device, "fp32", a.runs)
        depthwise_sweep(a.device, "fp16", a.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
