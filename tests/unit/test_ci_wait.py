"""`submit --wait` as the distributed mode runs it, on a SQLite farm with no services: a
running job's progress reaches the waiting client through the database (as a worker's lease
thread writes it), lines name the model when a campaign has several, the JUnit file is
written on every way out (a passed --wait-timeout, in the campaign or in a confirmation,
and an interrupt), and a regression the gate flagged shows in `status` and `results`."""

from __future__ import annotations

import argparse
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import Engine, select

from devicefarm.cli import main
from devicefarm.commands import common
from farm_core import jobs
from farm_core.database import Statements
from farm_core.schema import Job
from orchestrator.submit import RunSettings, submit
from tests.support.farm import RecordingDispatcher, add_device, sqlite_engine, write_model
from worker_agent.lease import LeaseKeeper
from worker_agent.runners.job_progress import JobProgress

DEVICE = "noop:a"


@pytest.fixture
def farm(tmp_path: Path, monkeypatch) -> Engine:
    monkeypatch.setenv("DEVICEFARM_HOME", str(tmp_path / "home"))  # the filesystem broker's
    engine = sqlite_engine(tmp_path)
    add_device(engine, DEVICE)
    return engine


def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'farm.db'}"


def campaign(engine: Engine, *models: Path, name: str = "") -> tuple[int, list[int]]:
    sub = submit(engine, RecordingDispatcher(), list(models), f"key={DEVICE}", "cpu",
                 RunSettings(num_runs=5, diff_runs=0), model_name=name)  # fmt: skip
    with engine.begin() as conn:
        ids = conn.execute(
            select(Job.id).where(Job.campaign_id == sub.campaign_id).order_by(Job.id)
        ).scalars()
        return sub.campaign_id, list(ids)


def finish(engine: Engine, job: int, fastest_us: float = 1000.0) -> None:
    runs = [fastest_us * 3, fastest_us, fastest_us * 2.5, fastest_us * 3.5]
    result = {"benchmark": {"runs_us": runs, "min_us": fastest_us},
              "median_us": float(np.median(runs)), "avg_us": float(np.mean(runs)),
              "config_fingerprint": "fp1"}  # fmt: skip
    with engine.begin() as conn:
        assert jobs.claim(conn, job, 1, "w", 60.0) is not None
        assert jobs.finish(conn, job, 1, "w", "succeeded", result)


def test_a_running_job_shows_its_progress_to_a_distributed_wait(farm, tmp_path, capsys) -> None:
    cid, [job] = campaign(farm, write_model(tmp_path / "m.tflite"))
    with farm.begin() as conn:
        assert jobs.claim(conn, job, 1, "w", 60.0) is not None
    # the worker's side: its runner's progress callback, its lease thread writing it
    progress = JobProgress(job, stream=io.StringIO())
    progress("benchmark", 0, 50)
    progress("benchmark", 12, 50)
    keeper = LeaseKeeper(Statements(farm), "w", lease_s=0.3)
    keeper.hold(job, 1, progress.line)
    try:
        assert not common.wait_showing_jobs(farm, cid, timeout_s=1.5)
    finally:
        keeper.release()
    out = capsys.readouterr().out
    assert f"  {DEVICE} cpu: running, benchmark: 12/50 runs" in out, out


def test_lines_name_the_model_when_a_campaign_has_two(farm, tmp_path, capsys) -> None:
    a, b = write_model(tmp_path / "a.tflite", 1.0), write_model(tmp_path / "b.tflite", 2.0)
    cid, ids = campaign(farm, a, b)
    for job in ids:
        finish(farm, job)
    assert common.wait_showing_jobs(farm, cid, timeout_s=5)
    lines = capsys.readouterr().out.splitlines()
    cells = {line.split("] ", 1)[1].split(": ")[0] for line in lines}
    assert cells == {f"a.tflite {DEVICE} cpu", f"b.tflite {DEVICE} cpu"}, lines


def test_one_model_lines_stay_as_they_were(farm, tmp_path, capsys) -> None:
    cid, [job] = campaign(farm, write_model(tmp_path / "m.tflite"))
    finish(farm, job)
    assert common.wait_showing_jobs(farm, cid, timeout_s=5)
    assert capsys.readouterr().out.startswith(f"[1/1] {DEVICE} cpu: succeeded")


def junit_errors(path: Path) -> list[tuple[str, str]]:
    suite = ET.parse(path).getroot().find("testsuite")
    return [(e.get("type"), e.get("message")) for e in suite.iter("error")]


def submit_and_wait(tmp_path: Path, *extra: str) -> int:
    model = write_model(tmp_path / "m.tflite")
    argv = ["submit", str(model), "--devices", f"key={DEVICE}", "--configs", "cpu", "--wait"]
    return main([*argv, "--junit", str(tmp_path / "junit.xml"), "--db", url(tmp_path), *extra])


def test_wait_timeout_writes_junit_with_the_unfinished_jobs(farm, tmp_path) -> None:
    # no agent serves the device: the job stays dispatched
    assert submit_and_wait(tmp_path, "--wait-timeout", "1") == 1
    assert junit_errors(tmp_path / "junit.xml") == [
        ("unfinished", "dispatched when the wait ended: --wait-timeout 1 s passed")
    ]


def test_an_interrupted_wait_writes_junit(farm, tmp_path, monkeypatch) -> None:
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("devicefarm.embedded.wait_for_campaign", interrupted)
    assert submit_and_wait(tmp_path) == 130
    assert junit_errors(tmp_path / "junit.xml") == [
        ("unfinished", "dispatched when the wait ended: interrupted")
    ]


def gate_args(tmp_path: Path, pairs: int, wait_timeout: float | None = None) -> argparse.Namespace:
    return argparse.Namespace(
        baseline=None,
        regression_threshold=5.0,
        confirm_pairs=pairs,
        junit=str(tmp_path / "junit.xml"),
        wait_timeout=wait_timeout,
        broker=None,
        db=url(tmp_path),
    )


def regressed_campaign(farm: Engine, tmp_path: Path) -> int:
    """Six good runs of `net`, then a version 30% slower."""
    v1, v2 = write_model(tmp_path / "v1.tflite", 1.0), write_model(tmp_path / "v2.tflite", 2.0)
    for us in (1000.0, 1010.0, 990.0, 1005.0, 995.0, 1000.0):
        _, [job] = campaign(farm, v1, name="net")
        finish(farm, job, us)
    cid, [job] = campaign(farm, v2, name="net")
    finish(farm, job, 1300.0)
    return cid


def test_a_confirmation_past_wait_timeout_writes_junit(farm, tmp_path) -> None:
    cid = regressed_campaign(farm, tmp_path)
    assert common.gate(gate_args(tmp_path, pairs=1, wait_timeout=0.5), farm, cid) == 1
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert [f.get("type") for f in suite.iter("failure")] == ["unconfirmed"]


def test_a_regression_the_gate_flagged_shows_in_status_and_results(farm, tmp_path, capsys) -> None:
    cid = regressed_campaign(farm, tmp_path)
    assert common.gate(gate_args(tmp_path, pairs=0), farm, cid) == 3
    capsys.readouterr()
    assert main(["status", "--db", url(tmp_path)]) == 0
    [line] = [x for x in capsys.readouterr().out.splitlines() if x.startswith(f"campaign {cid} ")]
    assert "gate: regressed (exit 3)" in line
    assert main(["status", str(cid), "--db", url(tmp_path)]) == 0
    assert "regressed (not confirmed: confirmation is off)" in capsys.readouterr().out
    assert main(["results", str(cid), "--db", url(tmp_path), "--format", "json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["gate"].startswith("regressed (not confirmed: confirmation is off)")
