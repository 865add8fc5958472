"""`devicefarm results` shows how each figure was measured: the configuration fingerprint,
the timing path and median ± CI in the table, the whole record in JSON, and each
configuration's switches with their sources under --show-config; results from before the
record read as {} and "" (orchestrator.provenance, orchestrator.report)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devicefarm.cli import main
from orchestrator import provenance
from orchestrator.report import campaign_rows, format_configs, format_table
from orchestrator.submit import submit
from tests.support.farm import RecordingDispatcher, add_device, sqlite_engine, write_model
from tests.support.measured_farm import (
    CPU_KEY,
    CPU_NEW,
    GPU_KEY,
    GPU_NEW,
    finish_campaign,
    measured_farm,
    record,
)


@pytest.fixture
def farm(tmp_path: Path) -> str:
    measured_farm(tmp_path)
    return f"sqlite:///{tmp_path / 'farm.db'}"


# -- reading one record -------------------------------------------------------------------


def test_a_full_record_reads_as_people_need_it() -> None:
    m = record(GPU_NEW, 500.0, False, "profiled")
    assert provenance.short_fingerprint(GPU_NEW) == "b1b1b1b1"
    assert provenance.timing_path(m) == "profiled"
    assert provenance.median_ci_ms(m) == "0.500 ± 0.0025"
    assert provenance.config_rows(m) == [
        {"switch": "benchmark.enable_op_profiling", "value": True, "source": "option"},
        {"switch": "gpu.persistent", "value": False, "source": "env"},
    ]
    assert provenance.conditions(m) == {
        "driver": "580.159.04",
        "clocks_mhz.sm": 1980,
        "host_load": [1.2, 0.9, 0.5],
    }


def test_an_unstable_median_without_interval_is_marked() -> None:
    m = {"uncertainty": {"median_us": 1234.0, "stable": False}}
    assert provenance.median_ci_ms(m) == "1.234 (unstable)"


@pytest.mark.parametrize("m", [{}, None, {"timing": "x", "config": [], "uncertainty": 3}])
def test_a_missing_or_odd_record_reads_as_nothing(m: object) -> None:
    assert provenance.short_fingerprint("") is None
    assert provenance.timing_path(m) is None
    assert provenance.median_ci_ms(m) is None
    assert provenance.config_rows(m) == []
    assert provenance.conditions(m) == {}
    assert provenance.describe("", m) == [
        "no configuration record (measured before results kept one)"
    ]


def test_a_phone_record_with_timing_alone_says_it_has_no_switches() -> None:
    m = {"timing": {"path": "shipped", "profile": "none"}}  # benchmark_model keeps no record
    assert provenance.describe("", m) == [
        "configuration (no fingerprint)",
        "  timing: path shipped, profile none",
        "  no switches recorded (the tool keeps none)",
    ]


# -- the report's rows and formats --------------------------------------------------------


def test_rows_carry_the_record_and_the_table_shows_it(tmp_path: Path) -> None:
    engine, _ = measured_farm(tmp_path)
    rows = {r["device"]: r for r in campaign_rows(engine, 2)}
    gpu = rows[GPU_KEY]
    assert gpu["config_fingerprint"] == GPU_NEW
    assert gpu["measurement"] == record(GPU_NEW, 500.0, False, "profiled")
    assert (gpu["fingerprint"], gpu["timing"], gpu["median_ci_ms"]) == (
        "b1b1b1b1",
        "profiled",
        "0.500 ± 0.0025",
    )
    table = format_table(list(rows.values()))
    header = table.splitlines()[0]
    assert "median ± ci95 ms" in header and "timing" in header and "config id" in header
    gpu_line = next(line for line in table.splitlines() if line.startswith("m.tflite  opencl"))
    assert "0.500 ± 0.0025" in gpu_line and "profiled" in gpu_line and "b1b1b1b1" in gpu_line
    assert GPU_NEW not in table  # the short form only


def test_format_configs_prints_each_switch_with_its_source(tmp_path: Path) -> None:
    engine, _ = measured_farm(tmp_path)
    text = format_configs(campaign_rows(engine, 2))
    assert text.split("\n\n") == [
        "\n".join(
            [
                f"configuration {CPU_NEW}",
                "  timing: path shipped, profile separate pass",
                "  benchmark.enable_op_profiling = false  (option)",
                "  gpu.persistent                = false  (env)",
                f"  jobs: job 3 (m.tflite {CPU_KEY} cpu)",
            ]
        ),
        "\n".join(
            [
                f"configuration {GPU_NEW}",
                "  timing: path profiled, profile separate pass",
                "  benchmark.enable_op_profiling = true  (option)",
                "  gpu.persistent                = false  (env)",
                f"  jobs: job 4 (m.tflite {GPU_KEY} gpu-fp32)",
            ]
        ),
    ]


def test_results_from_before_the_record_read_as_empty(tmp_path: Path) -> None:
    engine = sqlite_engine(tmp_path)
    add_device(engine, CPU_KEY, "cpu", host="h")
    add_device(engine, GPU_KEY, "opencl", host="h")
    submit(engine, RecordingDispatcher(), [write_model(tmp_path / "m.tflite")], "all", "cpu")
    finish_campaign(engine, 1, {"cpu": {"avg_us": 100.0}})
    submit(engine, RecordingDispatcher(), [write_model(tmp_path / "m.tflite")], "all", "cpu")
    (old,) = campaign_rows(engine, 1)
    assert (old["config_fingerprint"], old["measurement"]) == ("", {})
    assert (old["fingerprint"], old["timing"], old["median_ci_ms"]) == (None, None, None)
    assert format_configs([old]) == (
        "no configuration record (measured before results kept one)\n"
        f"  jobs: job 1 (m.tflite {CPU_KEY} cpu)"
    )
    (queued,) = campaign_rows(engine, 2)  # no result yet: nothing to describe
    assert queued["result"] is None and format_configs([queued]) == ""


# -- the command ------------------------------------------------------------------------


def test_results_json_has_measurement_and_fingerprint(farm: str, capsys) -> None:
    assert main(["results", "2", "--db", farm, "--format", "json"]) == 0
    rows = {r["device"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows[CPU_KEY]["config_fingerprint"] == CPU_NEW
    assert rows[CPU_KEY]["measurement"] == record(CPU_NEW, 4000.0, False, "shipped")
    assert rows[GPU_KEY]["measurement"]["uncertainty"]["ci95_us"] == [498.0, 503.0]


def test_results_show_config_prints_the_records_after_the_table(farm: str, capsys) -> None:
    assert main(["results", "1", "--db", farm, "--show-config"]) == 0
    out = capsys.readouterr().out
    table, configs = out.split("\n\n", 1)
    assert table.splitlines()[0].startswith("model")
    assert "configuration a0a0a0a0a0a0a0a0" in configs
    assert "  gpu.persistent                = true  (default)" in configs
    assert f"  jobs: job 2 (m.tflite {GPU_KEY} gpu-fp32)" in configs


def test_results_table_without_show_config_has_no_records(farm: str, capsys) -> None:
    assert main(["results", "1", "--db", farm]) == 0
    out = capsys.readouterr().out
    assert "b0b0b0b0" in out and "configuration b0b0" not in out
