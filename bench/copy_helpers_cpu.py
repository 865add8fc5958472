"""The CPU the GPU delegate's input-copy helpers cost (host_copy.py), per invoke, in one run.

A float model (MobileNet v1) through the OpenCL delegate, invoked back to back and paced (an
invoke every --every-ms, as a camera or a server between requests), three ways in
alternating rounds: the helpers helper_plan() gives, spinning after a copy only in a
back-to-back stream (shipped); the same helpers spinning SPIN_US after every copy (the
policy before); no helper (DEVICEFARM_GPU_COPY_HELPERS=0, the anchor). Prints median wall
time and process CPU time per invoke, CPU/wall, and each way's ratios to the anchor.

    python bench/copy_helpers_cpu.py --model MODEL [--runs 400] [--every-ms 2] [--device SPEC]
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from delegate_runtime.gpu.opencl import host_copy  # noqa: E402


def session_invoke(model: str, x: np.ndarray, device: str | None, helpers: str | None):
    """An fp32 session's invoke, its helpers set as `helpers` (None: the plan's)."""
    from delegate_runtime import load_model
    from delegate_runtime.gpu.delegate import GpuSession

    os.environ.pop(host_copy.ENV, None)
    if helpers is not None:
        os.environ[host_copy.ENV] = helpers
    session = GpuSession(load_model(model), precision="fp32", device=device, log=io.StringIO())
    os.environ.pop(host_copy.ENV, None)
    session.invoke([x])
    return lambda: session.invoke([x])


def spinning_always(invoke: Callable[[], object]) -> Callable[[], object]:
    """`invoke` with the helpers spinning after every copy, as before (each copy then
    counts as back to back)."""

    def step() -> object:
        host_copy._last_end = float("inf")
        return invoke()

    return step


def measure(step: Callable[[], object], runs: int, every_s: float) -> tuple[list[int], float]:
    """Wall times (ns) of `runs` invokes, one every `every_s` (0: back to back), and the
    process CPU seconds they took, waits included."""
    walls = []
    cpu = time.process_time()
    next_at = time.perf_counter()
    for _ in range(runs):
        if every_s:
            next_at += every_s
        t = time.perf_counter_ns()
        step()
        walls.append(time.perf_counter_ns() - t)
        if every_s:
            time.sleep(max(0.0, next_at - time.perf_counter()))
    return walls, time.process_time() - cpu


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True)
    p.add_argument("--runs", type=int, default=400)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--every-ms", type=float, default=2.0)
    p.add_argument("--device", default=None)
    args = p.parse_args()

    from delegate_runtime import load_model

    graph = load_model(args.model).main
    shape = graph.tensors[graph.inputs[0]].shape
    x = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
    print("helper plan:", host_copy.helper_plan())
    shipped = session_invoke(args.model, x, args.device, None)
    ways = {
        "helpers, spin back to back only": shipped,
        "helpers, spin after every copy": spinning_always(shipped),
        "no helper (anchor)": session_invoke(args.model, x, args.device, "0"),
    }
    for stream, every_s in (
        ("back to back", 0.0),
        (f"every {args.every_ms:g} ms", 1e-3 * args.every_ms),
    ):
        walls: dict[str, list[int]] = {w: [] for w in ways}
        cpus: dict[str, float] = dict.fromkeys(ways, 0.0)
        for step in ways.values():
            measure(step, 50, every_s)  # warm-up
        for _ in range(args.rounds):
            for way, step in ways.items():
                w, c = measure(step, args.runs // args.rounds, every_s)
                walls[way] += w
                cpus[way] += c
        print(f"\n{stream}: median wall and mean process CPU per invoke")
        anchor_wall = statistics.median(walls["no helper (anchor)"]) / 1e6
        anchor_cpu = cpus["no helper (anchor)"] / len(walls["no helper (anchor)"]) * 1e3
        for way in ways:
            wall = statistics.median(walls[way]) / 1e6
            cpu = cpus[way] / len(walls[way]) * 1e3
            print(
                f"  {way:34s} wall {wall:.3f} ms ({wall / anchor_wall:.3f}x)  "
                f"CPU {cpu:.3f} ms ({cpu / anchor_cpu:.2f}x)  CPU/wall {cpu / wall:.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
