"""Results as table, CSV and JSON; speed-ups against the cpu configuration."""

from __future__ import annotations

import json
from pathlib import Path

from farm_core import jobs, metrics
from farm_core.schema import SUCCEEDED
from orchestrator.report import campaign_rows, format_csv, format_json, format_table
from orchestrator.submit import submit
from tests.support.farm import (
    RecordingDispatcher,
    add_device,
    finish_jobs,
    sqlite_engine,
    write_model,
)


def test_rows_and_formats(tmp_path: Path) -> None:
    engine = sqlite_engine(tmp_path)
    add_device(engine, "cpu:reference:h", "cpu")
    add_device(engine, "opencl:x:y", "opencl")
    submit(
        engine,
        RecordingDispatcher(),
        [write_model(tmp_path / "m.tflite")],
        "all",
        "cpu,gpu-fp32,gpu-fp16",
    )
    for job_id, avg in ((1, 4000.0), (2, 1000.0)):
        with engine.begin() as c:
            jobs.claim(c, job_id, 1, "w", 60)
            jobs.finish(
                c, job_id, 1, "w", SUCCEEDED, {"avg_us": avg, "delegated_ops": 1, "total_ops": 1}
            )
    rows = campaign_rows(engine, 1)
    by = {(r["device"], r["config"]): r for r in rows}
    assert by[("opencl:x:y", "gpu-fp16")]["state"] == "dispatched"
    fast = [r for r in rows if r["avg_ms"] == 1.0][0]
    assert fast["speedup"] == 4.0 and fast["delegated"] == "1/1"
    table = format_table(rows)
    assert "vs cpu" in table and "4.00x" in table
    assert format_csv(rows).splitlines()[0].startswith("job,model,")
    assert len(json.loads(format_json(rows))) == 3


def test_a_row_without_a_cpu_baseline_says_why(tmp_path: Path) -> None:
    engine = sqlite_engine(tmp_path)
    add_device(engine, "android:own", "android")  # runs cpu: its own baseline
    add_device(engine, "android:none", "android")  # its cpu run failed: no figure
    add_device(engine, "opencl:x:y", "opencl", host="h")  # no CPU reference on host h
    submit(
        engine, RecordingDispatcher(), [write_model(tmp_path / "m.tflite")], "all", "cpu,gpu-fp32"
    )
    finish_jobs(engine, failed=frozenset({("android:none", "cpu")}))
    rows = {(r["device"], r["config"]): r for r in campaign_rows(engine, 1)}
    assert rows[("android:none", "gpu-fp32")]["speedup"] is None
    assert rows[("android:none", "gpu-fp32")]["note"] == metrics.no_baseline_reason("android")
    assert rows[("android:none", "cpu")]["note"] == "ToolOutputError: no result"  # no latency
    assert rows[("opencl:x:y", "gpu-fp32")]["note"] == metrics.no_baseline_reason("opencl")
    assert rows[("android:own", "gpu-fp32")]["speedup"] == 1.0
    assert rows[("android:own", "gpu-fp32")]["note"] == ""
    table = format_table(list(rows.values()))
    assert "no CPU run on this device" in table and "no CPU reference run on its host" in table
