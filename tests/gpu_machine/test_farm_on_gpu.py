"""The farm's own flows on the GPU machine, default settings: the embedded run, a worker
with the reconciler, results read back; each stored figure against `devicefarm benchmark`
(the un-profiled path the delegate ships) measured in the same call."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

#: A stored median may lie this far outside the benchmark command's medians: the farm's
#: row is one process, and on the H200 one process's median of MobileNet v1 moves up to
#: 12 % from the next's (2026-12-04, two calls: benchmark processes 263-268 us beside a
#: stored 295, and 268-279 beside a stored 252; 5 % failed on those draws). The error this
#: guards against, the profiling path stored for the shipped one, was 2.8x.
AGREEMENT = 0.12
#: Benchmark processes per precision: one process's median moves 5-12 % from the next's on
#: the H200 (288 and 255 us beside a stored 268 and 258 us).
BENCH_PROCESSES = 3
#: A stored median's resolution, us: benchmark_model's figures are whole microseconds.
RESOLUTION_US = 1.0
CONFIGS = ("gpu-fp32", "gpu-fp16")
RUNS = "300"


def devicefarm(home: Path, *args: str, timeout: float = 900.0) -> subprocess.CompletedProcess:
    env = os.environ | {"DEVICEFARM_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "devicefarm", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    print(f"$ devicefarm {' '.join(args)}  (rc {done.returncode})\n{done.stdout[-6000:]}")
    print(done.stderr[-3000:], file=sys.stderr)
    return done


def stored_results(home: Path, campaign: int) -> list[dict[str, Any]]:
    done = devicefarm(home, "results", str(campaign), "--format", "json", "--full")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def benchmark_median(home: Path, model: Path, precision: str, out: Path) -> dict[str, Any]:
    flags = ["--gpu_precision_loss_allowed=" + ("true" if precision == "fp16" else "false")]
    done = devicefarm(
        home,
        "benchmark",
        "--graph",
        str(model),
        "--use_gpu=true",
        "--device=NVIDIA",
        *flags,
        "--num_runs",
        RUNS,
        "--json",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def embedded(tmp_path_factory, gpu_model, nvidia_device) -> dict[str, Any]:
    """One embedded run of both GPU configurations, default settings, and the benchmark
    command's un-profiled figures (BENCH_PROCESSES processes each) right after it."""
    home = tmp_path_factory.mktemp("farm")
    run = devicefarm(
        home, "run", str(gpu_model), "--devices", "opencl", "--configs", ",".join(CONFIGS),
        "--runs", RUNS, timeout=1500.0,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "resident program builders" in run.stdout  # NVIDIA's: started before the canary
    rows = stored_results(home, 1)
    bench = {
        p: [
            benchmark_median(home, gpu_model, p, home / f"bench-{p}-{i}.json")
            for i in range(BENCH_PROCESSES)
        ]
        for p in ("fp32", "fp16")
    }
    return {"rows": rows, "bench": bench, "home": home}


@pytest.mark.parametrize("config", CONFIGS)
def test_the_embedded_run_stores_the_shipped_paths_median(embedded, config):
    rows = [r for r in embedded["rows"] if r["config"] == config]
    assert len(rows) == 1 and rows[0]["state"] == "succeeded", rows
    row = rows[0]
    medians = [b["median_us"] for b in embedded["bench"][config.split("-")[1]]]
    stored = row["median_ms"] * 1000.0
    print(f"{config}: stored median {stored} us, benchmark processes {medians} us")
    print(f"{config}: stored init {row['init_ms']} ms, +process {row['process_init_ms']} ms")
    m = row["measurement"]
    session = {k: v["value"] for k, v in m["config"].items() if k.startswith("gpu.session.")}
    print(f"{config}: stored row's session {session}, uncertainty {m['uncertainty']}")
    assert min(medians) * (1 - AGREEMENT) <= stored <= max(medians) * (1 + AGREEMENT)


@pytest.mark.parametrize("config", CONFIGS)
def test_the_row_carries_its_configuration_record(embedded, config):
    row = next(r for r in embedded["rows"] if r["config"] == config)
    m = row["measurement"]
    bench = embedded["bench"][config.split("-")[1]][0]["measurement"]
    assert m["timing"]["path"] == "shipped"
    assert m["timing"]["profile"].startswith("separate pass")
    assert row["config_fingerprint"] == m["fingerprint"] == bench["fingerprint"]
    config_record = m["config"]
    assert config_record["gpu.session.profiling"]["value"] is False
    assert config_record["gpu.session.persistent_kernels"]["value"] > 0
    assert config_record["gpu.session.host_edges"]["value"] is True
    assert config_record["gpu.session.launch_loop"]["value"] == "c"
    conditions = m["conditions"]
    assert conditions["platform"].startswith("NVIDIA")
    assert conditions["driver"] and conditions["job_memory_mb"] > 0
    assert conditions["driver_reserved_mb"] > 0
    assert "sm_clock_mhz" in conditions and "temperature_c" in conditions
    u = m["uncertainty"]
    assert u["stable"] is True and u["ci95_us"][0] <= u["median_us"] <= u["ci95_us"][1]
    assert u["cpu_time_per_inference_us"] > 0


@pytest.mark.parametrize("grouping", [(), ("--group-devices", "8")], ids=["own", "grouped"])
def test_a_worker_with_the_reconciler_runs_a_submitted_job(
    tmp_path, gpu_model, nvidia_device, grouping
):
    """With device groups on, a GPU device still gets a process of its own (its
    measurement is never shared); the job runs on the shipped path either way."""
    home = tmp_path / "lab"
    assert devicefarm(home, "db", "upgrade").returncode == 0  # the farm the worker joins
    env = os.environ | {"DEVICEFARM_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    log = (tmp_path / "worker.log").open("w")
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "devicefarm", *args],
            env=env,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )  # fmt: skip
        for args in (("worker", "--devices", "opencl", *grouping), ("reconcile", "--every", "2"))
    ]
    try:
        time.sleep(5)  # the agent registers its devices (the submission needs them)
        deadline = time.monotonic() + 120
        while True:
            done = devicefarm(
                home, "submit", str(gpu_model), "--devices", "kind=opencl",
                "--configs", "gpu-fp32", "--runs", "200", "--wait", "--wait-timeout", "600",
            )  # fmt: skip
            if done.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(5)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        rows = stored_results(home, 1)
        assert [r["state"] for r in rows] == ["succeeded"]
        assert rows[0]["measurement"]["timing"]["path"] == "shipped"
        assert rows[0]["median_ms"] > 0
        # the embedded run's user cache holds this model's program: a warm start
        row = rows[0]
        print(f"worker: stored init {row['init_ms']} ms, +process {row['process_init_ms']} ms")
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        log.close()
        print((tmp_path / "worker.log").read_text()[-4000:])


def litert_cpu_medians_us(model: Path) -> tuple[list[float], int]:
    """LiteRT's CPU runtime on `model` on every usable CPU (litert_cpu.py), in
    BENCH_PROCESSES fresh processes as a farm job runs in one: their medians, the threads."""
    script = Path(__file__).with_name("litert_cpu.py")
    medians, threads = [], 0
    for _ in range(BENCH_PROCESSES):
        done = subprocess.run(
            [sys.executable, str(script), str(model)], capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        figures = json.loads(done.stdout.splitlines()[-1])
        medians.append(figures["median_us"])
        threads = figures["threads"]
    return medians, threads


def test_a_model_too_small_for_the_gpu_runs_on_the_cpu_as_fast_as_litert(
    tmp_path, small_model, nvidia_device
):
    """Default settings: the placement rule keeps a model below the GPU's minimum work on
    LiteRT's CPU runtime (gpu/placement.py); the row says so, and its stored median is no
    slower than LiteRT's CPU on every usable CPU, measured right after in fresh processes.
    The row is one process, whole microseconds; a process's median of alexa_v0.1 moved
    10.6-13.3 us from one to the next on an H100's host (2026-12-06), LiteRT's 8.8-13.1
    (2026-12-07: a stored 12 us failed twice in four against LiteRT's middle process), so
    the stored median is held to LiteRT's slowest of its processes (with AGREEMENT and the
    row's microsecond): what this guards against, the model placed on the GPU (LiteRT's GPU
    takes 666 us a run of it) or a slower CPU path, still fails."""
    home = tmp_path / "farm"
    run = devicefarm(
        home, "run", str(small_model), "--devices", "opencl", "--configs", "gpu-fp32",
        "--runs", "2000",
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    [row] = stored_results(home, 1)
    assert row["state"] == "succeeded", row
    d = row["delegation"]
    assert d["nodes_delegated"] == 0 and d["below_min_work"]["nodes"] == d["nodes_total"]
    record = row["measurement"]["config"]
    assert record["gpu.session.below_min_work"]["value"] == d["nodes_total"]
    assert record["gpu.session.cpu_fallback"]["value"] == "litert"
    stored = row["median_ms"] * 1000.0
    medians, threads = litert_cpu_medians_us(small_model)
    print(
        f"{small_model.name}: stored {stored} us, LiteRT's CPU ({threads} threads) "
        f"processes {[round(m, 1) for m in medians]} us"
    )
    assert stored <= max(medians) * (1 + AGREEMENT) + RESOLUTION_US
