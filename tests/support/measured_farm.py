"""A small SQLite farm whose results carry measurement records (results.measurement and
results.config_fingerprint), for the CLI's and the dashboard's views of them.

One model on a host `h` with a CPU reference and an OpenCL GPU, two campaigns of `cpu` and
`gpu-fp32`; the second measured each configuration under a different record:

    campaign  cpu (cpu:reference:h)          gpu-fp32 (opencl:x:y)
    1         6000 us, CPU_OLD               1000 us, GPU_OLD (shipped path)
    2         4000 us, CPU_NEW               500 us,  GPU_NEW (profiled path, persistent off)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select

from farm_core import jobs
from farm_core.schema import SUCCEEDED, Job
from orchestrator.submit import submit
from tests.support.farm import RecordingDispatcher, add_device, sqlite_engine, write_model

CPU_OLD, CPU_NEW = "a0a0a0a0a0a0a0a0", "a1a1a1a1a1a1a1a1"
GPU_OLD, GPU_NEW = "b0b0b0b0b0b0b0b0", "b1b1b1b1b1b1b1b1"
CPU_KEY, GPU_KEY = "cpu:reference:h", "opencl:x:y"


def record(fingerprint: str, median_us: float, persistent: bool, path: str) -> dict[str, Any]:
    """A measurement record as runners store it (the keys the views read)."""
    return {
        "fingerprint": fingerprint,
        "config": {
            "gpu.persistent": {"value": persistent, "source": "default" if persistent else "env"},
            "benchmark.enable_op_profiling": {"value": path == "profiled", "source": "option"},
        },
        "timing": {"path": path, "profile": "separate pass"},
        "conditions": {
            "driver": "580.159.04",
            "clocks_mhz": {"sm": 1980},
            "host_load": [1.2, 0.9, 0.5],
        },
        "uncertainty": {
            "median_us": median_us,
            "ci95_us": [median_us - 2.0, median_us + 3.0],
            "trials": 5,
            "warmup_runs": 40,
            "stable": True,
        },
    }


#: campaign -> config -> (avg_us, fingerprint, persistent, timing path)
PLAN = {
    1: {"cpu": (6000.0, CPU_OLD, True, "shipped"), "gpu-fp32": (1000.0, GPU_OLD, True, "shipped")},
    2: {"cpu": (4000.0, CPU_NEW, False, "shipped"), "gpu-fp32": (500.0, GPU_NEW, False, "profiled")},
}  # fmt: skip


def finish_campaign(engine: Engine, campaign_id: int, results: dict[str, dict]) -> None:
    """Claim and finish each job of a campaign with the result given for its config."""
    with engine.begin() as conn:
        rows = conn.execute(select(Job.id, Job.config).where(Job.campaign_id == campaign_id)).all()
    for job_id, config in rows:
        with engine.begin() as conn:
            assert jobs.claim(conn, job_id, 1, "w", 60) is not None
            assert jobs.finish(conn, job_id, 1, "w", SUCCEEDED, results[config])


def measured_farm(folder: Path) -> tuple[Engine, str]:
    """The farm above and its model's sha256."""
    engine = sqlite_engine(folder)
    add_device(engine, CPU_KEY, "cpu", host="h")
    add_device(engine, GPU_KEY, "opencl", host="h")
    model = write_model(folder / "m.tflite")
    for campaign, plan in PLAN.items():
        sub = submit(engine, RecordingDispatcher(), [model], "all", "cpu,gpu-fp32")
        assert sub.campaign_id == campaign
        results = {
            config: {
                "avg_us": avg,
                "median_us": avg,
                "config_fingerprint": fp,
                "measurement": record(fp, avg, persistent, path),
            }
            for config, (avg, fp, persistent, path) in plan.items()
        }
        finish_campaign(engine, campaign, results)
    with engine.begin() as conn:
        sha = conn.execute(select(Job.model_sha256)).scalars().first()
    return engine, sha
