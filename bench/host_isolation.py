"""Does a GPU job slow the CPU reference beside it on the same host?

    python bench/host_isolation.py MODEL [--cpu-runs 20] [--device NVIDIA]

Times the CPU reference (`devicefarm benchmark`, its own process) alone, then while a GPU
benchmark of the same model streams inferences in another process, once with the copy
helpers as the farm ships them and once with DEVICEFARM_GPU_COPY_HELPERS=0, and prints
each CPU median with its ratio to the idle one (the anchor, measured in the same run).
Each process gets the environment a farm job would, plus `extra_env` per scenario.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Seconds the GPU stream runs before the CPU measurement starts (its warm-up).
GPU_LEAD_S = 20.0


def _benchmark(model: str, out: Path, *flags: str, env: dict | None = None) -> list[str]:
    return [sys.executable, "-m", "devicefarm", "benchmark", "--graph", model, "--json",
            str(out), "--progress=false", *flags]  # fmt: skip


def cpu_median(model: str, runs: int, tmp: Path, name: str) -> dict:
    out = tmp / f"cpu-{name}.json"
    cmd = _benchmark(model, out, "--num_runs", str(runs), "--warmup_runs", "3")
    subprocess.run(cmd, check=True, capture_output=True)
    r = json.loads(out.read_text())
    u = r["measurement"]["uncertainty"]
    return {"median_us": r["median_us"], "ci95_us": u["ci95_us"],
            "cpu_us": u["cpu_time_per_inference_us"]}  # fmt: skip


def beside_gpu(model: str, runs: int, tmp: Path, name: str, device: str, extra: dict) -> dict:
    out = tmp / f"gpu-{name}.json"
    cmd = _benchmark(model, out, "--use_gpu=true", f"--device={device}", "--num_runs",
                     "10000000", "--min_secs", "600", "--max_secs", "600")  # fmt: skip
    gpu = subprocess.Popen(cmd, env=os.environ | extra, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        time.sleep(GPU_LEAD_S)
        if gpu.poll() is not None:
            raise SystemExit(f"the GPU stream ended early: {gpu.stderr.read()[-2000:]}")
        cpu = cpu_median(model, runs, tmp, name)
        cpu["gpu_alive"] = gpu.poll() is None
    finally:
        gpu.terminate()
        gpu.wait(30)
    return cpu


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("--cpu-runs", type=int, default=20)
    p.add_argument("--device", default="NVIDIA")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        idle = cpu_median(args.model, args.cpu_runs, tmp, "idle")
        rows = [("CPU reference alone (anchor)", idle)]
        shipped = beside_gpu(args.model, args.cpu_runs, tmp, "shipped", args.device, {})
        rows.append(("beside a GPU stream, helpers as shipped", shipped))
        none = beside_gpu(args.model, args.cpu_runs, tmp, "nohelpers", args.device,
                          {"DEVICEFARM_GPU_COPY_HELPERS": "0"})  # fmt: skip
        rows.append(("beside a GPU stream, DEVICEFARM_GPU_COPY_HELPERS=0", none))
        again = cpu_median(args.model, args.cpu_runs, tmp, "idle-again")
        rows.append(("CPU reference alone, again", again))
    print(f"host: {os.cpu_count()} CPUs, {len(os.sched_getaffinity(0))} usable")
    print(f"{'scenario':55} {'median ms':>10} {'95% CI ms':>17} {'vs alone':>9}")
    for name, r in rows:
        ci = r["ci95_us"] or [float("nan")] * 2
        print(f"{name:55} {r['median_us'] / 1e3:10.2f} {ci[0] / 1e3:8.2f}-{ci[1] / 1e3:<8.2f} "
              f"{r['median_us'] / idle['median_us']:9.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
