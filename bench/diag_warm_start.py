"""Where a warm start's time goes: a fresh process with the kernel cache full, step by step.

    python bench/diag_warm_start.py MODEL... [--device NVIDIA] [--repeat 3] [--contexts 5]
        [--uploads MB] [--trials]

`--contexts N`: N fresh processes each timing pyopencl's import, the platforms, the first
and a second OpenCL context and a queue, and whether another thread runs Python while a
context is being created (the GIL released: "overlap" near 1.0) or not (near 0.0).
Per model: one cold child fills a new, empty cache; then `--repeat` warm children print
their session's init phases, each program binary's load (count, sum, the longest) and the
wall time of the loads, each executor step's ms (`ex_*_ms`: the arena, staging, binding,
the persistent kernels' trials, the copies; `ex_init_ms` the whole, its rest the wait for
the program), the first inference's, and the last warm child the delegate's functions that
took the most time (cProfile, cumulative, the main thread). `--trials`: each persistent
kernel's trial timed to its end, then once more (groups, first ms, second ms): a failed grid
spins to its limit. `--uploads MB`: fresh processes each timing a new context's first and
second upload of MB from pageable memory, through COPY_HOST_PTR, in 2 MB chunks and through
a pinned staging buffer. Each child prints one JSON line. `--hold-device`: as
cold_start.py's.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cold_start import clean_env, hold_device, model_inputs  # noqa: E402


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1e3, 2)


def _spin(seconds: float) -> int:
    """Pure-Python iterations done in `seconds` (needs the GIL)."""
    end, n = time.perf_counter() + seconds, 0
    while time.perf_counter() < end:
        n += 1
    return n


def child_context(device: str | None) -> dict:
    t = time.perf_counter()
    import pyopencl as cl

    out = {"import_ms": _ms(t)}
    t = time.perf_counter()
    platforms = cl.get_platforms()
    out["platforms_ms"] = _ms(t)
    from delegate_runtime.gpu.opencl.runtime import select_device

    t = time.perf_counter()
    dev = select_device(device)
    out["select_ms"] = _ms(t)
    out["platforms"] = [p.name for p in platforms]
    alone = _spin(0.05)
    made: dict = {}

    def make() -> None:
        s = time.perf_counter()
        made["ctx"] = cl.Context([dev])
        made["ms"] = _ms(s)

    t = time.perf_counter()
    th = threading.Thread(target=make)
    th.start()
    spun, spin_start = 0, time.perf_counter()
    while th.is_alive():
        spun += _spin(0.005)
    th.join()
    out["context_ms"] = made["ms"]
    spin_s = time.perf_counter() - spin_start
    out["overlap"] = round((spun / max(spin_s, 1e-9)) / (alone / 0.05), 2)
    from delegate_runtime.gpu.opencl.host_edges import host_edges_for

    steps = {
        "queue": lambda: made.__setitem__("queue", cl.CommandQueue(made["ctx"], dev)),
        "host_edges": lambda: host_edges_for(made["ctx"], made["queue"]),
        "buffer": lambda: cl.Buffer(made["ctx"], cl.mem_flags.READ_WRITE, 1 << 20),
    }
    for name, step in steps.items():  # each in a thread: its time, and the GIL's share
        took: dict = {}

        def run(step=step, took=took) -> None:
            s = time.perf_counter()
            step()
            took["ms"] = _ms(s)

        th = threading.Thread(target=run)
        spun, spin_start = 0, time.perf_counter()
        th.start()
        while th.is_alive():
            spun += _spin(0.002)
        th.join()
        spin_s = time.perf_counter() - spin_start
        out[f"{name}_ms"] = took["ms"]
        out[f"{name}_overlap"] = round((spun / max(spin_s, 1e-9)) / (alone / 0.05), 2)
    t = time.perf_counter()
    cl.Context([dev])
    out["context2_ms"] = _ms(t)
    return out


#: How child_upload copies a fresh context's first N MB to the device.
UPLOAD_WAYS = ("pageable", "copy_host_ptr", "chunks", "pinned", "pinned_chunks")


def child_upload(device: str | None, way: str, mb: int) -> dict:
    """A fresh context's first upload of `mb` MB (an arena's constants) one `way`, then a
    second of the same size the same way: the first's cost over the second is the
    driver's first-use work, the second's the copy itself."""
    import numpy as np
    import pyopencl as cl

    from delegate_runtime.gpu.opencl.runtime import select_device

    dev = select_device(device)
    t = time.perf_counter()
    ctx = cl.Context([dev])
    queue = cl.CommandQueue(ctx, dev)
    out: dict = {"way": way, "mb": mb, "context_ms": _ms(t)}
    host = np.random.default_rng(0).integers(0, 255, mb << 20, dtype=np.uint8)
    mf = cl.mem_flags
    for attempt in ("first", "second"):
        t = time.perf_counter()
        if way == "copy_host_ptr":
            buf = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=host)
            queue.finish()
        else:
            buf = cl.Buffer(ctx, mf.READ_WRITE, host.nbytes)
            src = host
            if way.startswith("pinned"):
                s = time.perf_counter()
                staging = cl.Buffer(ctx, mf.READ_ONLY | mf.ALLOC_HOST_PTR, host.nbytes)
                mapped, _ = cl.enqueue_map_buffer(
                    queue, staging, cl.map_flags.WRITE_INVALIDATE_REGION, 0, host.shape, host.dtype
                )
                out[f"{attempt}_pin_ms"] = _ms(s)
                s = time.perf_counter()
                mapped[:] = host
                out[f"{attempt}_fill_ms"] = _ms(s)
                src = mapped
            if way.endswith("chunks"):
                step = 2 << 20
                for at in range(0, host.nbytes, step):
                    cl.enqueue_copy(
                        queue, buf, src[at : at + step], dst_offset=at, is_blocking=False
                    )
                queue.finish()
            else:
                cl.enqueue_copy(queue, buf, src, is_blocking=True)
        out[f"{attempt}_ms"] = _ms(t)
        back = np.empty(16, np.uint8)
        cl.enqueue_copy(queue, back, buf, src_offset=host.nbytes - 16, is_blocking=True)
        assert (back == host[-16:]).all(), "the upload did not arrive"
    return out


def _timed_binary_loads(stats: dict) -> None:
    """Wrap the C API's binary build (as program.py calls it) to count and time it."""
    from delegate_runtime.gpu.opencl import program

    real = program.build_from_binary
    lock = threading.Lock()

    def timed(*args, **kwargs):
        s = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            e = time.perf_counter()
            with lock:
                stats["n"] += 1
                stats["sum_ms"] += (e - s) * 1e3
                stats["max_ms"] = max(stats["max_ms"], (e - s) * 1e3)
                stats["first"] = min(stats["first"], s)
                stats["last"] = max(stats["last"], e)
                stats["bytes"] += len(args[3])

    program.build_from_binary = timed


def _thread_times(stats: dict) -> None:
    """Wrap the lowering's steps to add their wall and this thread's CPU ms to `stats`: a
    wall far above the CPU means the thread waited (for the GIL, held by another)."""
    from delegate_runtime.gpu.opencl import preparation

    for name in ("start_context", "jobs_for", "staged_edges", "lower_partitions", "model_program"):
        real = getattr(preparation, name)

        def timed(*args, _real=real, _name=name, **kwargs):
            w, c = time.perf_counter(), time.thread_time()
            try:
                return _real(*args, **kwargs)
            finally:
                stats[f"{_name}_wall_ms"] = round((time.perf_counter() - w) * 1e3, 1)
                stats[f"{_name}_cpu_ms"] = round((time.thread_time() - c) * 1e3, 1)

        setattr(preparation, name, timed)


def _executor_times(stats: dict) -> None:
    """Wrap an executor's steps (summed over partitions, ms): the arena's allocation and
    upload, the staging buffers, binding, the persistent kernels' trials, the copies'
    preparation, and the whole (its rest: the wait for the program's load)."""
    from delegate_runtime.gpu.opencl import arena, executor

    steps = [(arena.Arena, "__init__", "arena")]
    steps += [
        (executor.PartitionExecutor, m, m.strip("_"))
        for m in ("__init__", "_staging", "_bind_launches", "_persist", "_prepare_copies")
    ]
    for owner, name, label in steps:
        real = getattr(owner, name)

        def timed(*args, _real=real, _label=label, **kwargs):
            t = time.perf_counter()
            try:
                return _real(*args, **kwargs)
            finally:
                key = f"ex_{_label}_ms"
                stats[key] = round(stats.get(key, 0.0) + (time.perf_counter() - t) * 1e3, 1)

        setattr(owner, name, timed)


def _trial_times(trials: list) -> None:
    """Wrap the persistent kernels' trial launch (executor.enqueue_once, as _persist calls
    it) to time each to its end, then a second launch of it (ms; the same grid, the
    barrier counts left at zero by the first): a first launch far above the second is the
    driver's first-use work; a trial near the spin limit's time is a grid that failed."""
    from delegate_runtime.gpu.opencl import executor

    real = executor.enqueue_once

    def timed(queue, kernel, gsize, lsize):
        t = time.perf_counter()
        real(queue, kernel, gsize, lsize)
        queue.finish()
        first = _ms(t)
        t = time.perf_counter()
        real(queue, kernel, gsize, lsize)
        queue.finish()
        trials.append((gsize[0] // (lsize[0] if lsize else 1), first, _ms(t)))

    executor.enqueue_once = timed


def child_session(
    model_path: str, precision: str, device: str | None, cache: str, prof: bool, trials_timed: bool
):
    import pyopencl  # noqa: F401

    from delegate_runtime import load_model
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.opencl import preparation  # noqa: F401  (cold_start's child)
    from delegate_runtime.ops.registry import supported_ops

    supported_ops()
    stats = {"n": 0, "sum_ms": 0.0, "max_ms": 0.0, "first": 1e18, "last": 0.0, "bytes": 0}
    _timed_binary_loads(stats)
    steps: dict = {}
    _thread_times(steps)
    _executor_times(steps)
    trials: list = []
    if trials_timed:
        _trial_times(trials)
    model = load_model(model_path)
    xs = model_inputs(model_path)
    profiler = cProfile.Profile() if prof else None
    t0 = time.perf_counter()
    if profiler:
        profiler.enable()
    session = GpuSession(
        model, precision=precision, device=device, serialization_dir=cache, log=io.StringIO()
    )
    if profiler:
        profiler.disable()
    init = _ms(t0)
    t1 = time.perf_counter()
    session.invoke(xs)
    steps["first_inference_ms"] = _ms(t1)
    if trials:
        steps["trials (groups, first ms, second ms)"] = trials
    out = {
        "init_ms": init,
        "phases": {k: round(v) for k, v in session.init_phases_ms.items()},
        "program": session.program_summary,
        "binary_loads": stats["n"],
        "binary_sum_ms": round(stats["sum_ms"], 1),
        "binary_max_ms": round(stats["max_ms"], 1),
        "binary_wall_ms": round((stats["last"] - stats["first"]) * 1e3, 1) if stats["n"] else 0,
        "binary_kb": stats["bytes"] // 1024,
        **steps,
    }
    if profiler:
        text = io.StringIO()
        st = pstats.Stats(profiler, stream=text)
        st.sort_stats("cumtime").print_stats(r"opencl|executor|arena|pyopencl", 45)
        out["profile"] = [ln for ln in text.getvalue().splitlines() if ln.strip()][-48:]
    return out


def run_child(args: list[str], env: dict) -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, env=env
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode or not lines:
        return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-3:]}
    return json.loads(lines[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*")
    ap.add_argument("--device", default=None)
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--contexts", type=int, default=0)
    ap.add_argument(
        "--uploads",
        type=int,
        default=0,
        metavar="MB",
        help="fresh processes each timing a first upload of MB one way",
    )
    ap.add_argument("--hold-device", action="store_true", help="as cold_start.py's")
    ap.add_argument("--way", choices=UPLOAD_WAYS, help=argparse.SUPPRESS)
    ap.add_argument("--child", choices=("context", "session", "upload"), help=argparse.SUPPRESS)
    ap.add_argument("--cache", help=argparse.SUPPRESS)
    ap.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--trials", action="store_true", help="time each persistent kernel's trial")
    a = ap.parse_args()
    if a.child == "context":
        print(json.dumps(child_context(a.device)))
        return 0
    if a.child == "upload":
        print(json.dumps(child_upload(a.device, a.way, a.uploads)))
        return 0
    if a.child == "session":
        got = child_session(a.models[0], a.precision, a.device, a.cache, a.profile, a.trials)
        print(json.dumps(got))
        return 0
    dev = ["--device", a.device] if a.device else []
    if a.hold_device:
        print("held open by this process throughout:", hold_device(a.device), flush=True)
    root = tempfile.mkdtemp(prefix="warm-diag-")
    env = {k: v for k, v in clean_env(root, {}).items() if k != "CUDA_CACHE_PATH"}
    for _ in range(a.contexts):
        print("context", json.dumps(run_child(["--child", "context", *dev], env)), flush=True)
    for _ in range(2 if a.uploads else 0):
        for way in UPLOAD_WAYS:
            args = ["--child", "upload", "--way", way, "--uploads", str(a.uploads), *dev]
            print("upload", json.dumps(run_child(args, env)), flush=True)
    for model in a.models:
        cache = tempfile.mkdtemp(prefix="kernels-", dir=root)
        base = ["--child", "session", model, "--cache", cache, "--precision", a.precision, *dev]
        base += ["--trials"] if a.trials else []
        cold = run_child(base, env)
        print(Path(model).stem, "cold", json.dumps(cold), flush=True)
        for i in range(a.repeat):
            last = i == a.repeat - 1
            warm = run_child(base + (["--profile"] if last else []), env)
            profile = warm.pop("profile", [])
            print(Path(model).stem, "warm", json.dumps(warm), flush=True)
            for line in profile:
                print("   ", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
