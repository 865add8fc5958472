"""Dashboard queries on a seeded SQLite farm, without Streamlit."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from dashboard import queries
from devicefarm.demo_lab import MODELS, SeedSummary, seed
from farm_core import metrics
from farm_core.schema import Campaign
from orchestrator.allowlist.rules import Thresholds
from orchestrator.submit import SubmissionError, submit
from tests.support.farm import (
    RecordingDispatcher,
    add_device,
    finish_jobs,
    sqlite_engine,
    write_model,
)


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory) -> tuple[Engine, SeedSummary]:
    engine = sqlite_engine(Path(tmp_path_factory.mktemp("queries")))
    return engine, seed(engine)


def sha(summary: SeedSummary, i: int = 0) -> str:
    return summary.models[MODELS[i].name]


def test_fleet_states_and_current_jobs(farm) -> None:
    engine, _ = farm
    rows = {r["key"]: r for r in queries.fleet(engine)}
    assert rows["android:a52_2"]["state"] == "offline"
    assert rows["android:quarantined_tab"]["health"] == "quarantined"
    assert sum(1 for r in rows.values() if r["current_job"]) == 4
    assert any("ssd_mobilenet_v2.tflite (gpu-fp16)" in r["current_job"] for r in rows.values())


def test_campaign_progress_and_failures(farm) -> None:
    engine, summary = farm
    rows = queries.campaigns(engine)
    assert len(rows) == summary.campaigns
    running = rows[0]
    assert 0 < running["progress"] < 1 and running["running"] == 4
    assert all(r["progress"] == 1.0 for r in rows[1:])
    failures = queries.campaign_failures(engine, 1)
    assert failures and all(f["state"] in ("failed", "timed_out") for f in failures)
    assert all("\n" not in f["reason"] for f in failures)


def test_compare_speedups_and_init(farm) -> None:
    engine, summary = farm
    rows = {(r["device"], r["config"]): r for r in queries.compare(engine, sha(summary))}
    nvidia = rows[("opencl:nvidia:nvidia_geforce_rtx_3080", "gpu-fp32")]
    assert nvidia["speedup"] > 10  # against lab1's CPU reference
    assert rows[("android:s21", "cpu")]["speedup"] == pytest.approx(1.0)
    assert rows[("opencl:pocl:pthread_cpu", "gpu-fp32")]["speedup"] < 1
    assert any(r["init_cold_ms"] and r["init_cached_ms"] for r in rows.values())
    assert all(r["peak_mb"] > 0 for r in rows.values())


def test_accuracy_per_output_with_task_accuracy(farm) -> None:
    engine, summary = farm
    rows = queries.accuracy(engine, sha(summary, 1))
    outputs = {r["output"] for r in rows}
    assert len(outputs) == len(MODELS[1].outputs)
    top1 = [r for r in queries.accuracy(engine, sha(summary, 0)) if "task top1" in r]
    assert top1 and all(0.0 < r["task top1"] <= MODELS[0].top1 for r in top1)


def test_op_coverage_lists_fallbacks_with_reasons(farm) -> None:
    engine, summary = farm
    rows = queries.op_coverage(engine, sha(summary, 1))
    assert rows and all(r["cpu_ops"] == 1 and not r["fully_delegated"] for r in rows)
    assert rows[0]["fallbacks"][0]["op"] == "CUSTOM"
    assert all(r["fully_delegated"] for r in queries.op_coverage(engine, sha(summary, 0)))


def test_matrix_covers_models_by_current_devices(farm) -> None:
    engine, summary = farm
    rows = queries.matrix(queries.allowlists(engine, Thresholds()))
    assert len(rows) == len(MODELS) * len(summary.devices)
    by = {(r["model"], r["device"]): r for r in rows}
    assert by[(MODELS[0].name, "android:pixel8")]["status"] == "unknown"
    assert by[(MODELS[3].name, "android:pixel7")]["code"] == "crashed"


def test_history_flags_the_seeded_regression(farm) -> None:
    engine, summary = farm
    assert "android:pixel4a" in queries.history_devices(engine, sha(summary))
    rows = queries.flag_regressions(queries.history(engine, sha(summary), "android:pixel4a"))
    flagged = [r for r in rows if r["regression"]]
    assert flagged and all(r["campaign_name"] == "nightly #6" for r in flagged)
    assert rows[0]["change"] is None and rows[0]["driver"].startswith("OpenGL ES")


def _avg_rows(*values: float) -> list[dict]:
    return [{"config": "c", "outcome": "succeeded", "avg_ms": v} for v in values]


def test_flag_regressions_threshold() -> None:
    rows = _avg_rows(10.0, 10.2, 9.9, 10.1, 10.0, 11.5)
    assert [r["regression"] for r in queries.flag_regressions(rows, 0.1)] == [0] * 5 + [1]
    assert not any(r["regression"] for r in queries.flag_regressions(rows, 0.2))


def test_one_lucky_fast_run_is_not_the_reference() -> None:
    """The old chain judged each run against the last good one: after a lucky 7.0 ms run,
    an ordinary 10.3 ms run was a 47% regression."""
    rows = queries.flag_regressions(_avg_rows(10.0, 10.1, 9.9, 10.0, 10.2, 7.0, 10.3))
    assert not any(r["regression"] for r in rows)
    assert abs(rows[-1]["change"] - 0.03) < 0.01  # against the median of the six before


def test_a_few_runs_judge_with_a_conservative_prior() -> None:
    """Under five earlier runs the noise is not learned: a 15% step is not flagged yet."""
    rows = queries.flag_regressions(_avg_rows(10.0, 10.1, 9.9, 11.5), 0.05)
    assert [r["regression"] for r in rows] == [0, 0, 0, 0]
    assert rows[-1]["noise"] >= 0.10


def test_check_upload() -> None:
    assert queries.check_upload("x", b"").errors == ["the file is empty"]
    assert "TFL3" in queries.check_upload("x", b"12345678abc").errors[0]
    assert "does not parse" in queries.check_upload("x", b"\0\0\0\0TFL3\0\0").errors[0]


def test_submit_upload_uses_the_spine(farm, tmp_path: Path) -> None:
    engine, _ = farm
    data = write_model(tmp_path / "m.tflite", scale=7.0).read_bytes()
    done = queries.submit_upload(
        engine, RecordingDispatcher(), "m.tflite", data, "kind=opencl", ["gpu-fp16"], "upload"
    )
    assert done.jobs == len(done.devices) >= 3
    with engine.begin() as conn:
        assert (
            conn.execute(select(Campaign.name).where(Campaign.id == done.campaign_id)).scalar_one()
            == "upload"
        )
    with pytest.raises(SubmissionError, match="TFL3"):
        queries.submit_upload(engine, RecordingDispatcher(), "bad", b"x" * 16, "all", ["cpu"])
    with pytest.raises(SubmissionError, match="matches no device"):
        queries.submit_upload(engine, RecordingDispatcher(), "m", data, "kind=nope", ["cpu"])


def test_dashboard_command_line(tmp_path: Path) -> None:
    import argparse

    from devicefarm.commands import dashboard as cmd

    (tmp_path / "x.db").touch()  # the farm must exist (an empty file is an empty database)
    url = f"sqlite:///{tmp_path / 'x.db'}"
    p = argparse.ArgumentParser()
    cmd.add_arguments(p)
    argv, env = cmd.command(p.parse_args(["--db", url, "--port", "9999", "--read-only"]))
    assert argv[1:4] == ["-m", "streamlit", "run"] and argv[4].endswith("dashboard/serve.py")
    assert "9999" in argv and env["DEVICEFARM_DB"] == url
    assert env[cmd.ENV_READ_ONLY] == "1"


def test_compare_peak_memory_of_rows_older_than_its_column(tmp_path: Path) -> None:
    """A result stored before results.peak_memory_mb existed falls back to its record's
    figure, but not to the -1 the tools print when they did not measure it."""
    from sqlalchemy import update

    from farm_core.schema import Result

    engine = sqlite_engine(tmp_path)
    summary = seed(engine)
    device = "android:s21"
    with engine.begin() as conn:
        rows = conn.execute(
            select(Result.id, Result.config, Result.benchmark).where(Result.device_key == device)
        ).all()
        assert {r.config for r in rows} >= {"cpu", "gpu-fp32"}
        for r in rows:
            peak = -1.0 if r.config == "cpu" else 42.0
            conn.execute(
                update(Result)
                .where(Result.id == r.id)
                .values(peak_memory_mb=None, benchmark={**r.benchmark, "memory": {"peak_mb": peak}})
            )
    got = {
        r["config"]: r["peak_mb"]
        for r in queries.compare(engine, sha(summary))
        if r["device"] == device
    }
    assert got["cpu"] is None
    assert got["gpu-fp32"] == 42.0


def test_compare_says_why_a_row_has_no_speedup(tmp_path: Path) -> None:
    engine = sqlite_engine(tmp_path)
    add_device(engine, "android:own", "android")  # runs cpu: its own baseline
    add_device(engine, "android:none", "android")  # its cpu run failed: no figure
    model = write_model(tmp_path / "m.tflite")
    submit(engine, RecordingDispatcher(), [model], "all", "cpu,gpu-fp32")
    finish_jobs(engine, failed=frozenset({("android:none", "cpu")}))
    rows = {(r["device"], r["config"]): r for r in queries.compare(engine, sha256(model))}
    none = rows[("android:none", "gpu-fp32")]
    assert none["speedup"] is None
    assert none["no_baseline"] == metrics.no_baseline_reason("android")
    own = rows[("android:own", "gpu-fp32")]
    assert (own["speedup"], own["no_baseline"]) == (1.0, "")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_op_coverage_names_nodes_the_placement_rule_left_to_the_cpu() -> None:
    stored = {"below_min_work": {"nodes": 5, "partitions": 1, "min_work": 2_000_000}}
    assert queries.min_work_fallbacks(stored) == [
        {
            "op": "5 supported op(s)",
            "reason": "partition below the GPU's minimum work (2000000 multiply-adds or "
            "output elements)",
        }
    ]
    assert queries.min_work_fallbacks({"unsupported": []}) == []
