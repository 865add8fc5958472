"""farm_core.metrics is the one definition of speed-up: the CLI report, the dashboard and the
allowlist give the same figure for the same results, and each is the device's own CPU (or,
for a desktop GPU, its host's CPU reference), never another machine's."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from dashboard import queries
from farm_core import jobs, metrics
from farm_core.schema import FAILED, SUCCEEDED, Job
from orchestrator.allowlist.collect import build_allowlist
from orchestrator.allowlist.rules import Thresholds, judge
from orchestrator.report import campaign_rows
from orchestrator.submit import submit
from tests.support.farm import RecordingDispatcher, add_device, sqlite_engine, write_model

#: key -> (kind, host); the phone hangs off lab1 but has a CPU of its own.
DEVICES = {
    "cpu:reference:lab1": ("cpu", "lab1"),
    "cpu:reference:lab2": ("cpu", "lab2"),
    "opencl:nvidia:rtx": ("opencl", "lab1"),
    "opencl:amd:rx": ("opencl", "lab2"),
    "android:s21": ("android", "lab1"),
    "android:pixel7": ("android", "lab2"),  # a second phone with a slower CPU of its own
    "android:a52": ("android", "lab1"),  # a phone whose own CPU run failed
    "opencl:intel:arc": ("opencl", "lab3"),  # a desktop GPU on a host with no CPU reference
}
#: (device, config) -> measured avg latency, µs
LATENCY_US = {
    ("cpu:reference:lab1", "cpu"): 8000.0,
    ("cpu:reference:lab2", "cpu"): 10000.0,
    ("opencl:nvidia:rtx", "gpu-fp32"): 1000.0,
    ("opencl:nvidia:rtx", "gpu-fp16"): 500.0,
    ("opencl:amd:rx", "gpu-fp32"): 2500.0,
    ("opencl:amd:rx", "gpu-fp16"): 2000.0,
    ("android:s21", "cpu"): 6000.0,
    ("android:s21", "gpu-fp32"): 3000.0,
    ("android:s21", "gpu-fp16"): 2000.0,
    ("android:pixel7", "cpu"): 12000.0,
    ("android:pixel7", "gpu-fp32"): 3000.0,
    ("android:pixel7", "gpu-fp16"): 2400.0,
    ("android:a52", "cpu"): None,  # failed
    ("android:a52", "gpu-fp32"): 2000.0,
    ("android:a52", "gpu-fp16"): 1000.0,
    ("opencl:intel:arc", "gpu-fp32"): 1000.0,
    ("opencl:intel:arc", "gpu-fp16"): 800.0,
}
#: The definition, worked by hand: own CPU for the phone, the host's CPU for desktop GPUs.
EXPECTED = {
    ("cpu:reference:lab1", "cpu"): 1.0,
    ("cpu:reference:lab2", "cpu"): 1.0,
    ("opencl:nvidia:rtx", "gpu-fp32"): 8.0,
    ("opencl:nvidia:rtx", "gpu-fp16"): 16.0,
    ("opencl:amd:rx", "gpu-fp32"): 4.0,
    ("opencl:amd:rx", "gpu-fp16"): 5.0,
    ("android:s21", "cpu"): 1.0,
    ("android:s21", "gpu-fp32"): 2.0,
    ("android:s21", "gpu-fp16"): 3.0,
    # its own CPU (12000), not the s21's (6000) nor the model's first CPU result
    ("android:pixel7", "cpu"): 1.0,
    ("android:pixel7", "gpu-fp32"): 4.0,
    ("android:pixel7", "gpu-fp16"): 5.0,
    # no CPU run of its own: no figure, never the x86 host's reference it hangs off
    ("android:a52", "gpu-fp32"): None,
    ("android:a52", "gpu-fp16"): None,
    ("opencl:intel:arc", "gpu-fp32"): None,
    ("opencl:intel:arc", "gpu-fp16"): None,
}
#: Why a device's GPU rows have no speed-up, as the allowlist's reason says it.
NO_BASELINE = {
    "android:a52": "no CPU run on this device",
    "opencl:intel:arc": "no CPU reference run on its host",
}


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory):
    folder = Path(tmp_path_factory.mktemp("metrics"))
    engine = sqlite_engine(folder)
    for key, (kind, host) in DEVICES.items():
        add_device(engine, key, kind, host=host, model=key, renderer=key, driver_version="1")
    model = write_model(folder / "m.tflite")
    sub = submit(engine, RecordingDispatcher(), [model], "all", "cpu,gpu-fp32,gpu-fp16")
    with engine.begin() as c:
        rows = c.execute(select(Job.id, Job.device_key, Job.config)).all()
    for job_id, device, config in rows:
        latency = LATENCY_US[(device, config)]
        values = {"avg_us": latency, "delegated_ops": 1, "total_ops": 1}
        values["max_avg_error"] = 1e-6 if config != "cpu" else None
        state = SUCCEEDED if latency else FAILED
        if not latency:
            values["error"] = "ToolOutputError: benchmark_model gave no result"
        with engine.begin() as c:
            jobs.claim(c, job_id, 1, "w", 60)
            jobs.finish(c, job_id, 1, "w", state, values)
    sha = next(r["sha256"] for r in campaign_rows(engine, sub.campaign_id))
    return engine, sub.campaign_id, sha


def _approx(want: float | None):
    return None if want is None else pytest.approx(want)


def report_speedups(farm) -> dict[tuple[str, str], float | None]:
    engine, campaign, _ = farm
    return {(r["device"], r["config"]): r["speedup"] for r in campaign_rows(engine, campaign)}


def dashboard_speedups(farm) -> dict[tuple[str, str], float | None]:
    engine, _, sha = farm
    return {(r["device"], r["config"]): r["speedup"] for r in queries.compare(engine, sha)}


def allowlist_speedups(farm) -> dict[tuple[str, str], float | None]:
    engine, _, sha = farm
    allowlist = build_allowlist(engine, sha, Thresholds(min_speedup=0))
    out = {}
    for entry in allowlist.entries:
        (device,) = entry.current
        for config, stats in entry.evidence.configs.items():
            if config != metrics.CPU_CONFIG:
                out[(device, config)] = judge(stats, entry.evidence.cpu_us, Thresholds()).speedup
    return out


def test_every_job_ran(farm) -> None:
    assert set(report_speedups(farm)) == set(LATENCY_US)


@pytest.mark.parametrize("device", sorted(NO_BASELINE))
def test_the_allowlist_says_why_there_is_no_speedup(farm, device: str) -> None:
    engine, _, sha = farm
    entry = build_allowlist(engine, sha, Thresholds()).entry_for(device)
    assert entry is not None and entry.evidence.cpu_us is None
    assert entry.decision.status == "unknown"
    assert NO_BASELINE[device] in entry.decision.reason


@pytest.mark.parametrize("case", sorted(EXPECTED), ids=lambda c: f"{c[0]}-{c[1]}")
def test_report_and_dashboard_give_the_definition(farm, case) -> None:
    assert report_speedups(farm)[case] == _approx(EXPECTED[case])
    assert dashboard_speedups(farm)[case] == _approx(EXPECTED[case])


@pytest.mark.parametrize(
    "case", sorted(c for c in EXPECTED if c[1] != "cpu"), ids=lambda c: f"{c[0]}-{c[1]}"
)
def test_allowlist_gives_the_definition(farm, case) -> None:
    assert allowlist_speedups(farm)[case] == _approx(EXPECTED[case])


def test_the_three_agree_on_every_gpu_row(farm) -> None:
    report, dashboard, allowlist = (
        report_speedups(farm),
        dashboard_speedups(farm),
        allowlist_speedups(farm),
    )
    for case, figure in allowlist.items():
        assert report[case] == _approx(figure) == dashboard[case], case


@pytest.mark.parametrize(
    ("cpu_us", "avg_us", "want"),
    [(100.0, 50.0, 2.0), (None, 50.0, None), (100.0, None, None), (100.0, 0.0, None)],
)
def test_speedup_is_none_without_both_figures(cpu_us, avg_us, want) -> None:
    assert metrics.speedup(cpu_us, avg_us) == want


def test_a_device_without_its_own_cpu_uses_its_host_reference_only() -> None:
    rows = [
        {"model": "m", "device": "cpu:reference:a", "host": "a", "kind": "cpu"}
        | {"config": "cpu", "avg_us": 900.0},
        {"model": "m", "device": "opencl:x", "host": "b", "kind": "opencl"}
        | {"config": "gpu-fp32", "avg_us": 300.0},
    ]
    metrics.add_speedups(rows)
    assert rows[0]["speedup"] == 1.0
    assert rows[1]["speedup"] is None  # host b has no CPU reference: no figure, not a's


def test_a_phone_is_compared_with_its_own_cpu_only() -> None:
    """A phone's CPU is not its lab host's x86: without its own `cpu` run, no figure."""
    rows = [
        {"model": "m", "device": "cpu:reference:a", "host": "a", "kind": "cpu"}
        | {"config": "cpu", "avg_us": 900.0},
        {"model": "m", "device": "opencl:x", "host": "a", "kind": "opencl"}
        | {"config": "gpu-fp32", "avg_us": 300.0},
        {"model": "m", "device": "android:p", "host": "a", "kind": "android"}
        | {"config": "gpu-fp32", "avg_us": 300.0},
        {"model": "m", "device": "android:q", "host": "a", "kind": "android"}
        | {"config": "cpu", "avg_us": 600.0},
        {"model": "m", "device": "android:q", "host": "a", "kind": "android"}
        | {"config": "gpu-fp32", "avg_us": 300.0},
    ]
    metrics.add_speedups(rows)
    assert [r["speedup"] for r in rows] == [1.0, 3.0, None, 1.0, 2.0]
