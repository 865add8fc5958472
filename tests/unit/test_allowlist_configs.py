"""The allowlist never averages results measured under different configuration records
(`results.config_fingerprint`): per facts signature and configuration it keeps the
results of the newest record only, CPU baselines included, and says how many it set
aside. Failed results keep no record: they are counted whatever the record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select

from dashboard import queries
from devicefarm.cli import main
from farm_core import jobs
from farm_core.schema import FAILED, SUCCEEDED, Job
from orchestrator.allowlist.collect import Allowlist, build_allowlist
from orchestrator.allowlist.export import render
from orchestrator.allowlist.rules import NOT_MEASURED, SUPPORTED, UNKNOWN, Thresholds
from orchestrator.submit import submit
from tests.support.farm import RecordingDispatcher, add_device, sqlite_engine, write_model

GPU, TWIN, CPU_REF = "opencl:nvidia:rtx", "opencl:nvidia:rtx-b", "cpu:reference:lab1"
#: Two cards the list cannot tell apart (equal facts), beside their host's CPU reference.
DEVICES = {
    CPU_REF: {"kind": "cpu", "host": "lab1", "model": "cpu", "renderer": "cpu"},
    GPU: {"kind": "opencl", "host": "lab1", "model": "RTX", "renderer": "RTX"},
    TWIN: {"kind": "opencl", "host": "lab1", "model": "RTX", "renderer": "RTX"},
}
OLD, NEW = "a" * 16, "b" * 16  #: configuration fingerprints: profiled, then shipped
#: (fingerprint, CPU reference µs, GPU µs): the old, profiled record is 1.5x slower on the
#: CPU and 3x slower on the GPU; mixed, the GPU's latency would vary 50% across results.
OLD_RUN = (OLD, 12_000.0, 3_000.0)
NEW_RUN = (NEW, 8_000.0, 1_000.0)
CRASH = "ToolOutputError: the delegate crashed"


def _farm(tmp_path: Path, rounds: list[tuple[str, tuple | str]]) -> Allowlist:
    """One campaign per round, in order (result ids grow): (device the GPU job runs on,
    OLD_RUN/NEW_RUN or a device-caused error); the CPU reference runs every round."""
    engine = sqlite_engine(tmp_path)
    for key, columns in DEVICES.items():
        add_device(engine, key, driver_version="1", **columns)
    model = write_model(tmp_path / "m.tflite")
    for device, run in rounds:
        sub = submit(
            engine, RecordingDispatcher(), [model], f"key={CPU_REF}|{device}", "cpu,gpu-fp32"
        )
        with engine.begin() as c:
            ids = c.execute(
                select(Job.id, Job.device_key, Job.config).where(Job.campaign_id == sub.campaign_id)
            ).all()
        for job_id, key, config in ids:
            values: dict = {"delegated_ops": 1, "total_ops": 1}
            if isinstance(run, str) and key != CPU_REF:  # failed: no figure, no record
                outcome, values["error"] = FAILED, run
            elif isinstance(run, str):  # the CPU reference ran as in NEW_RUN
                outcome = SUCCEEDED
                values |= {"avg_us": NEW_RUN[1], "config_fingerprint": NEW_RUN[0]}
            else:
                fingerprint, cpu_us, gpu_us = run
                outcome = SUCCEEDED
                values |= {"avg_us": cpu_us if key == CPU_REF else gpu_us}
                values |= {"max_avg_error": None if config == "cpu" else 1e-6}
                values["config_fingerprint"] = fingerprint
            with engine.begin() as c:
                jobs.claim(c, job_id, 1, "w", 60)
                jobs.finish(c, job_id, 1, "w", outcome, values)
    return build_allowlist(engine, model.name, Thresholds())


def test_decision_and_speedup_come_from_the_newest_configuration(tmp_path: Path) -> None:
    allowlist = _farm(tmp_path, [(GPU, OLD_RUN), (GPU, OLD_RUN), (GPU, NEW_RUN), (GPU, NEW_RUN)])
    entry = allowlist.entry_for(GPU)
    decision = entry.decision
    assert (decision.status, decision.config) == (SUPPORTED, "gpu-fp32"), decision.reason
    assert decision.speedup == pytest.approx(8.0)  # 8000 / 1000: new CPU over new GPU
    stats = entry.evidence.configs["gpu-fp32"]
    assert (stats.ok, stats.mean_us, stats.set_aside) == (2, pytest.approx(1000.0), 2)
    assert entry.evidence.cpu_us == pytest.approx(8000.0)  # the host's newest record only
    assert entry.evidence.set_aside == 2


def test_the_cpu_reference_sets_its_old_configuration_aside(tmp_path: Path) -> None:
    allowlist = _farm(tmp_path, [(GPU, OLD_RUN), (GPU, NEW_RUN)])
    cpu = allowlist.entry_for(CPU_REF).evidence
    assert (cpu.configs["cpu"].ok, cpu.configs["cpu"].set_aside, cpu.set_aside) == (1, 1, 1)
    assert cpu.configs["cpu"].mean_us == pytest.approx(8000.0)


def test_devices_with_equal_facts_are_not_averaged_across_configurations(
    tmp_path: Path,
) -> None:
    # the twin still ran under the old record (it ran last but one): one entry, new only
    allowlist = _farm(tmp_path, [(TWIN, OLD_RUN), (TWIN, OLD_RUN), (GPU, NEW_RUN), (GPU, NEW_RUN)])
    entry = allowlist.entry_for(TWIN)
    assert entry is allowlist.entry_for(GPU)
    stats = entry.evidence.configs["gpu-fp32"]
    assert (stats.ok, stats.set_aside) == (2, 2)
    assert entry.decision.status == SUPPORTED, entry.decision.reason


def test_a_failure_keeps_no_record_and_still_counts(tmp_path: Path) -> None:
    # the newest GPU result is a crash: it neither chooses the configuration nor is dropped
    allowlist = _farm(tmp_path, [(GPU, OLD_RUN), (GPU, NEW_RUN), (GPU, NEW_RUN), (GPU, CRASH)])
    entry = allowlist.entry_for(GPU)
    stats = entry.evidence.configs["gpu-fp32"]
    assert (stats.ok, stats.failed, stats.set_aside) == (2, 1, 1)
    assert (entry.decision.status, entry.decision.code) == (UNKNOWN, NOT_MEASURED)
    assert "passed in 2" in entry.decision.reason


def test_results_of_one_configuration_set_nothing_aside(tmp_path: Path) -> None:
    entry = _farm(tmp_path, [(GPU, NEW_RUN), (GPU, NEW_RUN)]).entry_for(GPU)
    assert entry.evidence.set_aside == 0
    assert entry.evidence.configs["gpu-fp32"].ok == 2


def test_the_dashboard_json_list_and_cli_say_what_was_set_aside(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    allowlist = _farm(tmp_path, [(GPU, OLD_RUN), (GPU, NEW_RUN)])  # one set aside each
    matrix = {r["device"]: r["set_aside"] for r in queries.matrix({"m": allowlist})}
    assert matrix == {CPU_REF: 1, GPU: 1, TWIN: 1}  # the twin shares the GPU's entry
    entries = json.loads(render(allowlist, "json"))["entries"]
    assert sorted(e["set_aside"] for e in entries) == [1, 1]
    db = f"sqlite:///{tmp_path / 'farm.db'}"
    assert (
        main(["allowlist", "--db", db, "--model", "m.tflite", "--out", "-", "--format", "csv"]) == 0
    )
    assert "2 results of other configurations set aside" in capsys.readouterr().err
