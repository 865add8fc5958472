"""Does a GPU job slow the CPU reference beside it on the same host? Through the farm.

    python bench/host_isolation.py MODEL [--cpu-runs 200] [--gpu-runs 100000] [--pin-cpus]

Starts a worker agent serving the host's CPU reference and its OpenCL GPU (its own
DEVICEFARM_HOME, the embedded broker and database) and the reconciler, then submits:
the model on the CPU reference alone (the anchor); a long GPU job and, while it streams
inferences, the same CPU job again; the CPU job alone once more. Prints each CPU job's
stored median with its 95 % interval and its ratio to the anchor measured in the same run,
and the GPU job's stored median, CPU time per inference and copy helpers.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: Seconds the GPU job gets to open its session and warm up before the CPU job starts.
GPU_LEAD_S = 25.0
AGENT_READY_S = 60.0
TERMINAL = ("succeeded", "failed", "timed_out", "cancelled")


class Lab:
    """A worker agent and the reconciler in a home of their own."""

    def __init__(self, home: Path, devices: str, pin: bool):
        self.env = os.environ | {"DEVICEFARM_HOME": str(home), "PYTHONUNBUFFERED": "1"}
        self.log = (home.parent / "lab.log").open("w")
        self.cli("db", "upgrade")  # the farm the worker and the reconciler join
        worker = ["worker", "--devices", devices] + (["--pin-cpus"] if pin else [])
        self.procs = [self._start(*worker), self._start("reconcile", "--every", "2")]
        self.campaigns = 0

    def _start(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "devicefarm", *args], env=self.env,
                                stdout=self.log, stderr=self.log, start_new_session=True)  # fmt: skip

    def cli(self, *args: str, check: bool = True) -> str:
        done = subprocess.run([sys.executable, "-m", "devicefarm", *args], env=self.env,
                              capture_output=True, text=True)  # fmt: skip
        if check and done.returncode != 0:
            raise SystemExit(f"devicefarm {' '.join(args)}: {done.stdout}{done.stderr}")
        return done.stdout

    def submit(self, model: str, config: str, runs: int, wait: bool) -> int:
        kind = "cpu" if config == "cpu" else "opencl"
        # each its own lineage: no job is another's regression baseline
        args = ["submit", model, "--devices", f"kind={kind}", "--configs", config,
                "--runs", str(runs), "--diff-runs", "0",
                "--name", f"isolation-{self.campaigns}"]  # fmt: skip
        deadline = time.monotonic() + AGENT_READY_S
        while True:  # the agent registers its devices first
            out = self.cli(*args, *(["--wait"] if wait else []), check=False)
            if out.startswith("campaign "):
                self.campaigns += 1
                return int(out.split()[1].rstrip(":"))
            if time.monotonic() > deadline:
                raise SystemExit(f"submit failed: {out}")
            time.sleep(2)

    def wait(self, campaign: int, timeout_s: float = 600.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            rows = json.loads(self.cli("results", str(campaign), "--format", "json"))
            if rows and all(r["state"] in TERMINAL for r in rows):
                return
            time.sleep(2)

    def result(self, campaign: int) -> dict[str, Any]:
        rows = json.loads(self.cli("results", str(campaign), "--format", "json", "--full"))
        if len(rows) != 1 or rows[0]["state"] != "succeeded":
            raise SystemExit(f"campaign {campaign}: {rows}")
        return rows[0]

    def stop(self) -> None:
        for p in self.procs:
            os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        self.log.close()


def _line(name: str, row: dict[str, Any], anchor: float | None) -> str:
    u = row["measurement"].get("uncertainty") or {}
    ci = u.get("ci95_us") or [float("nan")] * 2
    median = row["median_ms"]
    ratio = f"{median / anchor:8.3f}" if anchor else "        "
    return (f"{name:48} {median:9.3f} {ci[0] / 1e3:8.3f}-{ci[1] / 1e3:<8.3f} {ratio} "
            f"{u.get('cpu_time_per_inference_us', float('nan')) / 1e3:9.3f}")  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("--cpu-runs", type=int, default=200)
    p.add_argument("--gpu-runs", type=int, default=100_000)
    p.add_argument("--pin-cpus", action="store_true", help="the worker's --pin-cpus")
    args = p.parse_args()
    model = str(Path(args.model).resolve())
    with tempfile.TemporaryDirectory() as d:
        lab = Lab(Path(d) / "home", "cpu,opencl", args.pin_cpus)
        try:
            alone = lab.result(lab.submit(model, "cpu", args.cpu_runs, wait=True))
            gpu_campaign = lab.submit(model, "gpu-fp32", args.gpu_runs, wait=False)
            time.sleep(GPU_LEAD_S)
            beside = lab.result(lab.submit(model, "cpu", args.cpu_runs, wait=True))
            lab.wait(gpu_campaign)
            gpu = lab.result(gpu_campaign)
            again = lab.result(lab.submit(model, "cpu", args.cpu_runs, wait=True))
        finally:
            lab.stop()
            print((Path(d) / "lab.log").read_text()[-1500:])
    start_gpu = gpu["measurement"]["conditions"]
    print(f"host: {os.cpu_count()} CPUs; worker {'--pin-cpus' if args.pin_cpus else 'shared'}; "
          f"GPU job {gpu['median_ms'] * 1e3:.0f} us median over {args.gpu_runs} runs, copy "
          f"helpers {gpu['measurement']['config'].get('gpu.copy_helpers', {}).get('value')} "
          f"({gpu['measurement']['config'].get('gpu.copy_helpers.why', {}).get('value')}), "
          f"load {start_gpu.get('host_load')}")  # fmt: skip
    print(
        f"{'CPU reference job':48} {'median ms':>9} {'95% CI ms':>17} {'vs alone':>8} {'CPU ms/inf':>9}"
    )
    anchor = alone["median_ms"]
    print(_line("alone (the anchor)", alone, anchor))
    print(_line("beside the streaming GPU job", beside, anchor))
    print(_line("alone again", again, anchor))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
