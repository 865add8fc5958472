"""Every device kind stores the per-op profile and the peak memory (issue 15): the CPU and
OpenCL runners ask the benchmark tool for both and return the Android runner's keys; the
job's result stores the peak memory in its column; the dashboard reads both."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from sqlalchemy import inspect, select

from dashboard import queries
from devicefarm.demo_lab import MODELS, seed
from farm_core import metrics
from farm_core.configs import CONFIGS
from farm_core.database import MIGRATIONS_DIR, make_engine, migrate
from farm_core.schema import SUCCEEDED, Result
from tests.conftest import require
from tests.support.farm import sqlite_engine, write_model
from worker_agent.android.profile_output import op_profile_rows
from worker_agent.discovery import discover_cpu, discover_opencl
from worker_agent.runners import make_runner
from worker_agent.runners.base import JobSpec

#: The keys of an Android job's op profile rows (worker_agent/android/runner.py).
PROFILE_KEYS = set(op_profile_rows({"nodes": [{"name": "n", "node_type": "ADD"}]})[0])
FAST = {"num_runs": 3, "warmup_runs": 1, "min_secs": 0.0, "max_secs": 5.0, "diff_runs": 0}


def _spec(path: Path, config: str) -> JobSpec:
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    return JobSpec(1, 1, path, sha, CONFIGS[config], dict(FAST))


def _pocl():
    devices = discover_opencl("test")
    require(bool(devices), "an OpenCL device (PoCL)")
    return devices[0]


@pytest.mark.parametrize(
    ("kind", "config", "backend"),
    [("cpu", "cpu", "cpu"), ("opencl", "gpu-fp32", "gpu"), ("opencl", "gpu-fp16", "gpu")],
)
def test_runner_returns_op_profile_and_peak_memory(
    tmp_path: Path, kind: str, config: str, backend: str
) -> None:
    device = discover_cpu("test") if kind == "cpu" else _pocl()
    runner = make_runner(device)
    runner.setup()
    try:
        bench = runner.run(_spec(write_model(tmp_path / "m.tflite"), config)).benchmark
    finally:
        runner.teardown()
    rows = bench["op_profile_nodes"]
    assert rows and all(set(r) == PROFILE_KEYS for r in rows)
    assert {r["backend"] for r in rows} == {backend}
    assert all(r["avg_ms"] is not None and r["avg_ms"] >= 0 for r in rows)
    assert bench["peak_memory_mb"] > 0
    assert bench["peak_memory_mb"] == metrics.peak_memory_mb(bench)


@pytest.mark.parametrize(
    ("record", "want"),
    [
        ({"peak_memory_mb": 12.5}, 12.5),
        ({"memory": {"peak_mb": 30.0}}, 30.0),
        ({"peak_memory_mb": None, "memory": {"peak_mb": 7}}, 7.0),
        ({"memory": {"peak_mb": -1.0}}, None),  # benchmark_model's "not measured"
        ({}, None),
        ({"peak_memory_mb": "n/a", "memory": None}, None),
        ({"memory": {"peak_mb": float("nan")}}, None),
    ],
)
def test_peak_memory_metric(record: dict, want: float | None) -> None:
    assert metrics.peak_memory_mb(record) == want


def test_results_store_peak_memory_and_the_dashboard_reads_the_profile(tmp_path: Path) -> None:
    engine = sqlite_engine(tmp_path)
    summary = seed(engine)
    with engine.begin() as conn:
        peaks = conn.execute(
            select(Result.peak_memory_mb).where(Result.outcome == SUCCEEDED)
        ).scalars()
        peaks = list(peaks)
    assert peaks and all(p is not None and p > 0 for p in peaks)
    sha = summary.models[MODELS[1].name]  # the detector, with an op the GPU leaves
    rows = queries.op_profile(engine, sha, "opencl:nvidia:nvidia_geforce_rtx_3080", "gpu-fp32")
    assert [r["backend"] for r in rows] == ["gpu", "cpu"]
    assert set(rows[0]) == PROFILE_KEYS
    assert queries.op_profile(engine, sha, "no:such:device", "cpu") == []


def test_migration_adds_the_peak_memory_column_to_an_older_database(tmp_path: Path) -> None:
    from alembic import command
    from alembic.config import Config

    engine = make_engine(f"sqlite:///{tmp_path / 'old.db'}")
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0001")
    assert "peak_memory_mb" not in {c["name"] for c in inspect(engine).get_columns("results")}
    migrate(engine)
    assert "peak_memory_mb" in {c["name"] for c in inspect(engine).get_columns("results")}
