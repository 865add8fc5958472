"""What other processes' OpenCL contexts cost a new one: the question behind resident
builders that slow a warm start (issue 39).

    python bench/diag_idle_contexts.py [--device NVIDIA] [--idle 0,1,4,15] [--repeat 5]
        [--together 15] [--hold-device]

For each N of `--idle`, N idle processes are started in each state of `--states`
(`context`: a context kept; `program`: a context and a built program kept; `released`: a
context made and released, the process still running), then `--repeat` fresh processes
each time the platform, `clCreateContext` (as the runtime makes it), a queue and a first
buffer. `--together K`: K processes, imports and platform done, make their contexts at the
same moment (as builders woken together would); printed: the first, median and last to
have one, from the common start. Each child prints one JSON line; the table is medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cold_start import hold_device  # noqa: E402

_KERNEL = "__kernel void k(__global float* x) { x[get_global_id(0)] *= 2.0f; }"


def _ms(since: float) -> float:
    return round((time.monotonic() - since) * 1e3, 2)


def _open(device: str | None) -> tuple:
    from delegate_runtime.gpu.opencl.capi import opencl_library
    from delegate_runtime.gpu.opencl.runtime import select_device

    return opencl_library(), select_device(device)


def child_probe(device: str | None) -> dict:
    import pyopencl as cl

    from delegate_runtime.gpu.opencl.capi import create_context

    t = time.monotonic()
    lib, dev = _open(device)
    out = {"platform_ms": _ms(t)}
    t = time.monotonic()
    ctx = create_context(lib, dev)
    out["context_ms"] = _ms(t)
    t = time.monotonic()
    queue = cl.CommandQueue(ctx, dev)
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 1 << 20)
    cl.enqueue_fill_buffer(queue, buf, b"\0\0\0\0", 0, 1 << 20)
    queue.finish()
    out["queue_buffer_ms"] = _ms(t)
    return out


def child_idle(device: str | None, state: str) -> None:
    import pyopencl as cl

    from delegate_runtime.gpu.opencl.capi import create_context

    lib, dev = _open(device)
    ctx = create_context(lib, dev)
    kept = [ctx]
    if state == "program":
        kept.append(cl.Program(ctx, _KERNEL).build())
        queue = cl.CommandQueue(ctx, dev)
        kept += [queue, cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 64 << 20)]
    elif state == "released":
        del kept[:]
        del ctx
    print("ready", flush=True)
    sys.stdin.read()  # until the parent closes our stdin


def child_race(device: str | None) -> dict:
    from delegate_runtime.gpu.opencl.capi import create_context

    lib, dev = _open(device)
    print("ready", flush=True)
    go = float(sys.stdin.readline())
    while time.monotonic() < go:
        pass
    create_context(lib, dev)
    return {"made_at_ms": _ms(go)}


def _spawn(role: list[str], device: str | None) -> subprocess.Popen:
    args = [sys.executable, __file__, "--child", *role] + (["--device", device] if device else [])
    return subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _json(proc: subprocess.Popen) -> dict:
    out, _ = proc.communicate()
    return json.loads(out.strip().splitlines()[-1])


def idle_rows(device: str | None, idle: list[int], states: list[str], repeat: int) -> list:
    rows = []
    for state in states:
        for count in idle:
            if count == 0 and state != states[0]:
                continue
            idlers = [_spawn(["idle", state], device) for _ in range(count)]
            for proc in idlers:
                assert proc.stdout.readline().strip() == "ready", "an idle process failed"
            probes = [_json(_spawn(["probe"], device)) for _ in range(repeat)]
            for proc in idlers:
                proc.stdin.close()
                proc.wait()
            med = {k: statistics.median(p[k] for p in probes) for k in probes[0]}
            rows.append((state if count else "-", count, med, [p["context_ms"] for p in probes]))
    return rows


def race(device: str | None, count: int) -> list[float]:
    racers = [_spawn(["race"], device) for _ in range(count)]
    for proc in racers:
        assert proc.stdout.readline().strip() == "ready", "a racing process failed"
    go = time.monotonic() + 0.2
    for proc in racers:
        proc.stdin.write(f"{go}\n")
        proc.stdin.flush()
    return sorted(_json(proc)["made_at_ms"] for proc in racers)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--idle", default="0,1,4,15")
    ap.add_argument("--states", default="context,program,released")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--together", default="", help="comma-separated K: K contexts at once")
    ap.add_argument("--hold-device", action="store_true", help="as cold_start.py's")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        role = a.child[0]
        if role == "idle":
            child_idle(a.device, a.child[1])
            return 0
        print(json.dumps(child_probe(a.device) if role == "probe" else child_race(a.device)))
        return 0
    if a.hold_device:
        print(f"holding {hold_device(a.device)}")
    idle = [int(n) for n in a.idle.split(",") if n]
    print("| idle processes' state | N | platform ms | context ms (each) | queue+buffer ms |")
    print("| --- | --- | --- | --- | --- |")
    for state, count, med, each in idle_rows(a.device, idle, a.states.split(","), a.repeat):
        print(
            f"| {state} | {count} | {med['platform_ms']:.0f} | {med['context_ms']:.0f} "
            f"({', '.join(f'{v:.0f}' for v in each)}) | {med['queue_buffer_ms']:.0f} |"
        )
    for count in [int(n) for n in a.together.split(",") if n]:
        made = race(a.device, count)
        print(
            f"{count} contexts at once: first {made[0]:.0f} ms, median "
            f"{statistics.median(made):.0f}, last {made[-1]:.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
