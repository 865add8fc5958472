"""GPU delegate latency against LiteRT, in one run, on one machine.

Median host-in to host-out latency of MobileNet (or any float model) through our OpenCL
delegate in fp32 and fp16, beside LiteRT's GPU accelerator (CompiledModel) and LiteRT's
CPU interpreter at N threads; prints each and the ratios. `--init` measures cold and warm
initialisation in separate processes (empty cache, then the cache the first one wrote).

    python bench/bench_gpu.py --model MODEL [--runs 100] [--device SPEC] [--init]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def median_ms(fn: Callable[[], object], runs: int, warmup: int = 10) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        t = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t)
    return statistics.median(times) / 1e6


def interleaved_ms(
    steps: dict[str, Callable[[], object]], runs: int, rounds: int = 10, warmup_s: float = 1.0
) -> dict[str, tuple[float, float, float]]:
    """Median, p10 and p90 latency of each step, measured in alternating rounds after a
    timed warm-up, so that clock ramps and drift touch every runtime alike."""
    end = time.perf_counter() + warmup_s
    while time.perf_counter() < end:
        for step in steps.values():
            step()
    times: dict[str, list[int]] = {name: [] for name in steps}
    per_round = max(runs // rounds, 1)
    for _ in range(rounds):
        for name, step in steps.items():
            for _ in range(per_round):
                t = time.perf_counter_ns()
                step()
                times[name].append(time.perf_counter_ns() - t)
    out = {}
    for name, ts in times.items():
        ordered = sorted(ts)
        tenth = [ordered[len(ordered) // 10], ordered[9 * len(ordered) // 10]]
        out[name] = (statistics.median(ts) / 1e6, tenth[0] / 1e6, tenth[1] / 1e6)
    return out


def ours(
    model_path: str, x: np.ndarray, precision: str, device: str | None
) -> tuple[Callable[[], object], np.ndarray]:
    from delegate_runtime import load_model
    from delegate_runtime.gpu.delegate import GpuSession

    session = GpuSession(
        load_model(model_path), precision=precision, device=device, log=io.StringIO()
    )
    out = session.invoke([x])[0]
    return (lambda: session.invoke([x])), out


def litert_cpu(model_path: str, x: np.ndarray, threads: int) -> Callable[[], object]:
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=model_path, num_threads=threads)
    it.allocate_tensors()
    i, o = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]

    def step() -> None:
        it.set_tensor(i, x)
        it.invoke()
        it.get_tensor(o)

    return step


def litert_gpu(model_path: str, x: np.ndarray) -> Callable[[], object]:
    from ai_edge_litert.compiled_model import CompiledModel
    from ai_edge_litert.hardware_accelerator import HardwareAccelerator

    model = CompiledModel.from_file(model_path, hardware_accel=HardwareAccelerator.GPU)
    ins, outs = model.create_input_buffers(0), model.create_output_buffers(0)
    n_out = int(
        np.prod(
            model.get_output_tensor_details(list(model.get_signature_list())[0]).popitem()[1][
                "shape"
            ]
        )
    )

    def step() -> None:
        ins[0].write(x)
        model.run_by_index(0, ins, outs)
        outs[0].read(n_out, np.float32)

    return step


def profile(model_path: str, x: np.ndarray, precision: str, device: str | None) -> None:
    """Device time per node (OpenCL profiling events), largest first."""
    from delegate_runtime import load_model
    from delegate_runtime.gpu.delegate import GpuSession

    session = GpuSession(
        load_model(model_path),
        precision=precision,
        device=device,
        log=io.StringIO(),
        profiling=True,
    )
    for _ in range(5):
        session.invoke([x])
    per_node = session.op_profile_ns()
    ops = session.model.main.operators
    total = sum(per_node.values())
    print(f"\n{precision}: device time {total / 1e3:.1f} us over {len(per_node)} nodes")
    for node, ns in sorted(per_node.items(), key=lambda kv: -kv[1])[:12]:
        print(f"  {ops[node].op:22s} #{node:<3d} {ns / 1e3:8.1f} us")


def init_once(model_path: str, precision: str, device: str | None, cache: str, agent: bool) -> None:
    """Child process: time GpuSession creation with the given serialization dir. With
    `agent`, the device's OpenCL context is opened first, as a running agent holds it."""
    import pyopencl  # noqa: F401  (library loading is process start-up, not init)

    from delegate_runtime.ops.registry import supported_ops

    supported_ops()  # likewise: imports the reference kernel modules

    from delegate_runtime import load_model
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.opencl.cache import point_driver_cache
    from delegate_runtime.gpu.opencl.runtime import select_device, shared_context

    if agent:  # as an agent starts: driver cache in our directory, then the context
        point_driver_cache(Path(cache))
        shared_context(select_device(device))
    model = load_model(model_path)
    t = time.perf_counter()
    session = GpuSession(
        model,
        precision=precision,
        device=device,
        serialization_dir=cache,
        log=io.StringIO(),
    )
    init = time.perf_counter() - t
    print(
        json.dumps(
            {
                "init_ms": init * 1e3,
                "from_cache": session.program_from_cache,
                "phases_ms": session.init_phases_ms,
            }
        )
    )


def init_cold_warm(model_path: str, precision: str, device: str | None, agent: bool) -> dict:
    """Two fresh processes on one new cache directory: the first compiles, the second
    reads what the first stored."""
    cache = tempfile.mkdtemp(prefix="dfkc-")
    env = {k: v for k, v in os.environ.items() if k != "CUDA_CACHE_PATH"}
    results = []
    for _ in range(2):
        cmd = [
            sys.executable,
            __file__,
            "--model",
            model_path,
            "--precision",
            precision,
            "--child-init",
            cache,
        ]
        cmd += (["--device", device] if device else []) + (["--agent"] if agent else [])
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
        results.append(json.loads(out.strip().splitlines()[-1]))
    return {
        "cold_ms": results[0]["init_ms"],
        "warm_ms": results[1]["init_ms"],
        "warm_from_cache": results[1]["from_cache"],
        "warm_over_cold": results[1]["init_ms"] / results[0]["init_ms"],
        "cold_phases": results[0]["phases_ms"],
        "warm_phases": results[1]["phases_ms"],
    }


def print_init(model_path: str, device: str | None) -> None:
    """Cold and warm init, per job in a running agent and per fresh process."""
    for agent, where in ((True, "agent, device context open"), (False, "fresh process")):
        for precision in ("fp32", "fp16"):
            r = init_cold_warm(model_path, precision, device, agent)
            print(
                f"init {precision} ({where}): cold {r['cold_ms']:.1f} ms, warm "
                f"{r['warm_ms']:.1f} ms (warm/cold {r['warm_over_cold']:.3f}, "
                f"from cache: {r['warm_from_cache']})"
            )
            print(f"  phases ms, cold: {r['cold_phases']}\n  phases ms, warm: {r['warm_phases']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--device", default=None)
    ap.add_argument("--threads", type=int, default=16, help="LiteRT CPU threads")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--init", action="store_true", help="also measure cold and warm init")
    ap.add_argument("--profile", action="store_true", help="print device time per node")
    ap.add_argument("--golden", default=None, help=".npz with in_0/out_0 to check outputs")
    ap.add_argument("--child-init", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--agent", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child_init:
        init_once(a.model, a.precision, a.device, a.child_init, a.agent)
        return 0
    rng = np.random.default_rng(0)
    if a.golden:
        gold = np.load(a.golden)
        x, ref = gold["in_0"], gold["out_0"]
    else:
        from delegate_runtime import load_model

        t = load_model(a.model).main
        shape = t.tensors[t.inputs[0]].shape
        x, ref = rng.uniform(-1, 1, shape).astype(np.float32), None
    steps: dict[str, Callable[[], object]] = {}
    for precision in ("fp32", "fp16"):
        step, out = ours(a.model, x, precision, a.device)
        steps[f"devicefarm GPU {precision}"] = step
        if ref is not None:
            err = float(np.abs(out.astype(np.float64) - ref).max())
            print(f"devicefarm GPU {precision}: max |out - golden| = {err:.3g}")
    try:
        steps["LiteRT GPU (CompiledModel)"] = litert_gpu(a.model, x)
    except Exception as exc:  # the accelerator needs Vulkan; report, don't hide
        print(f"LiteRT GPU accelerator unavailable: {type(exc).__name__}: {exc}")
    steps[f"LiteRT CPU {a.threads} threads"] = litert_cpu(a.model, x, a.threads)
    stats = interleaved_ms(steps, a.runs)
    rows = {name: median for name, (median, _, _) in stats.items()}
    anchor = rows.get("LiteRT GPU (CompiledModel)")
    print(
        f"\nmedian of {a.runs} runs each, interleaved in 10 rounds after 1 s of warm-up, "
        "host in -> host out"
    )
    print(f"{'runtime':34s} {'ms':>8s} {'vs LiteRT GPU':>14s} {'p10 - p90 ms':>16s}")
    for name, ms in rows.items():
        ratio = f"{anchor / ms:.2f}x" if anchor else "-"
        _, lo, hi = stats[name]
        print(f"{name:34s} {ms:8.3f} {ratio:>14s} {lo:7.3f} - {hi:.3f}")
    print(f"fp16 / fp32 latency: {rows['devicefarm GPU fp16'] / rows['devicefarm GPU fp32']:.2f}")
    if a.profile:
        for precision in ("fp32", "fp16"):
            profile(a.model, x, precision, a.device)
    if a.init:
        print_init(a.model, a.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
