"""The GEMMs that compute their input from a depthwise window, on each tile (issue 14).

Each model is lowered four ways: as shipped (`plan`), by the rule before 2026-11-28
(`previous`: the 16-wide tile only for windows over 3x3 whose 32-wide tiles number fewer
than 4 per compute unit), and with every depthwise-computing GEMM on the 16-wide and on
the 32-wide tile, K split by the shipped rule for that tile (`gemm_lowering.k_split`). Per way:
the model's median host-in to host-out, the ways' sessions taking turns in rounds in one
process and one OpenCL context (separate processes on a lent machine differed by up to
1.5x on the same tree), no profiling queue alive. With --profile, then per such GEMM its
shape, window, the work groups each way launches and its profiled device time each way.

    python bench/dw_tiles.py MODEL [...] [--runs 100] [--rounds 6] [--precision fp32]
        [--profile] [--device SPEC]
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

WAYS = ("plan", "previous", "gemm16", "gemm32")
PROFILED_INVOKES = 30


def previous_plan(
    m: int, n: int, k: int, units: int, computed_a: bool, taps: int
) -> tuple[str, int, int]:
    """The tile rule of 54df840: 16 wide for a window over 3x3 where the 32-wide tiles
    number fewer than gemm_groups_per_cu (gpu/switches.py) per compute unit."""
    from delegate_runtime.gpu.opencl import gemm_lowering
    from delegate_runtime.gpu.switches import DEFAULTS

    target = DEFAULTS.gemm_groups_per_cu * units
    name = "gemm64" if -(-m // 64) * -(-n // 64) >= target else "gemm32"
    if taps > 9 and name == "gemm32" and -(-m // 32) * -(-n // 32) < target:
        name = "gemm16"
    return (name, *gemm_lowering.k_split(name, m, n, k, units, computed_a))


@contextlib.contextmanager
def lowered_as(way: str, shapes: dict[int, tuple]) -> Iterator[None]:
    """Lower with every depthwise-computing GEMM on `way`'s tile ('plan': as shipped),
    recording node -> (m, n, k, taps, variant, splits) of those GEMMs into `shapes`."""
    from delegate_runtime.gpu.opencl import gemm_lowering, lowering
    from delegate_runtime.gpu.opencl.records.depthwise import prologue_taps

    gemm, plan = lowering.Lowerer.gemm, gemm_lowering.gemm_plan
    signature = inspect.signature(gemm)
    current: dict[str, Any] = {}

    def recording_gemm(self: Any, op: Any, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, op, *args, **kwargs).arguments
        read = bound.get("read")  # lowering_api.ReadA: how the GEMM reads A
        dw = read.depthwise if read is not None else None
        current.update(node=op.index, taps=prologue_taps(dw) if dw is not None else 0)
        try:
            gemm(self, op, *args, **kwargs)
        finally:
            current.clear()

    def forced_plan(
        m: int,
        n: int,
        k: int,
        units: int,
        computed_a: bool = False,
        depthwise: bool = False,
        *aim: Any,  # groups per compute unit, switches: as the lowering passes them
    ):
        name, splits, kps = plan(m, n, k, units, computed_a, depthwise, *aim)
        if current.get("taps"):
            if way == "previous":
                name, splits, kps = previous_plan(m, n, k, units, computed_a, current["taps"])
            elif way != "plan":
                name = way
                splits, kps = gemm_lowering.k_split(name, m, n, k, units, computed_a, *aim)
            shapes[current["node"]] = (m, n, k, current["taps"], name, splits)
        return name, splits, kps

    lowering.Lowerer.gemm, gemm_lowering.gemm_plan = recording_gemm, forced_plan
    try:
        yield
    finally:
        lowering.Lowerer.gemm, gemm_lowering.gemm_plan = gemm, plan


def groups(m: int, n: int, name: str, splits: int) -> int:
    from delegate_runtime.gpu.opencl.records.gemm_kernel import GEMM_VARIANTS

    ts = GEMM_VARIANTS[name][0]
    return -(-m // ts) * -(-n // ts) * splits


def profile_nodes(session: Any, xs: list[np.ndarray], nodes: set[int]) -> dict[int, float]:
    """Median profiled device us of each node's launches over PROFILED_INVOKES invokes."""
    samples: dict[int, list[float]] = {n: [] for n in nodes}
    for _ in range(PROFILED_INVOKES):
        session.invoke(xs)
        for ex in session.executors:
            for node, ns in ex.profile_ns().items():
                if node in samples:
                    samples[node].append(ns / 1e3)
    return {n: statistics.median(v) for n, v in samples.items() if v}


def run_model(
    path: str, precision: str, device: str | None, runs: int, rounds: int, profile: bool
) -> None:
    import gc

    from bench_zoo import inputs_for, max_error

    from delegate_runtime import load_model
    from delegate_runtime.gpu.delegate import GpuSession

    xs = inputs_for(path)
    shapes: dict[str, dict[int, tuple]] = {way: {} for way in WAYS}
    timed: dict[str, Any] = {}
    outputs: dict[str, list[np.ndarray]] = {}
    for way in WAYS:
        with lowered_as(way, shapes[way]):
            timed[way] = GpuSession(load_model(path), precision, device, io.StringIO())
        outputs[way] = timed[way].invoke(xs)
        for _ in range(20):
            timed[way].invoke(xs)
    ms: dict[str, list[float]] = {way: [] for way in WAYS}
    for r in range(rounds):
        for way in WAYS if r % 2 == 0 else reversed(WAYS):
            ts = []
            for _ in range(runs):
                t = time.perf_counter_ns()
                timed[way].invoke(xs)
                ts.append(time.perf_counter_ns() - t)
            ms[way].append(statistics.median(ts) / 1e6)
    timed.clear()
    gc.collect()
    device_us: dict[str, dict[int, float]] = {}
    if profile:
        for way in WAYS:
            with lowered_as(way, {}):
                session = GpuSession(
                    load_model(path), precision, device, io.StringIO(), profiling=True
                )
            device_us[way] = profile_nodes(session, xs, set(shapes[way]))
            del session
            gc.collect()
    print(f"\n== {Path(path).stem} ({precision}): {len(shapes['plan'])} depthwise GEMMs")
    plan_ms = statistics.median(ms["plan"])
    for way in WAYS:
        diff = max_error(outputs[way], outputs["plan"])
        median = statistics.median(ms[way])
        rounds_ms = ", ".join(f"{v:.3f}" for v in ms[way])
        total = (
            f"; these GEMMs' device sum {sum(device_us[way].values()):8.1f} us" if profile else ""
        )
        print(
            f"  {way:8s} host-to-host ms {median:.3f} ({rounds_ms}), {median / plan_ms:.3f}x "
            f"plan's{total}; max diff vs plan {diff:.1e} of range"
        )
    print(
        "  node      m     n     k taps | " + " | ".join(f"{way:8s} groups    us" for way in WAYS)
    )
    for node in sorted(shapes["plan"]):
        m, n, k, taps = shapes["plan"][node][:4]
        cells = []
        for way in WAYS:
            _, _, _, _, name, splits = shapes[way][node]
            us = device_us.get(way, {}).get(node, float("nan"))
            cells.append(f"{name:6s}x{splits:<2d} {groups(m, n, name, splits):5d} {us:5.1f}")
        print(f"  {node:4d} {m:6d} {n:5d} {k:5d} {taps:4d} | " + " | ".join(cells))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--profile", action="store_true", help="profile each GEMM each way")
    ap.add_argument("--precision", default="fp32", choices=("fp32", "fp16"))
    ap.add_argument("--device", default=None)
    a = ap.parse_args()
    for path in a.models:
        try:
            run_model(path, a.precision, a.device, a.runs, a.rounds, a.profile)
        except Exception as exc:  # named, and the other models go on
            print(f"\n== {Path(path).stem}: {type(exc).__name__}: {exc}")


if __name__ == "__main__":
    main()
