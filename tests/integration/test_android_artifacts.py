"""Debug artifacts of phone runs (issue 45), on simulated phones through the real adb
server: a benchmark_model that crashes leaves logcat (threadtime), its tombstone (pulled
from a root phone, debuggerd's copy from logcat's crash buffer otherwise) and its signal; a
clean run leaves logcat and the conditions; a retried attempt keeps the tool's output; and
the whole job through the executor stores them beside the result's own output."""

from __future__ import annotations

import json
import re

import pytest
from sqlalchemy import select

from farm_core import artifacts as stored
from farm_core.artifacts import NewArtifact
from farm_core.schema import FAILED, Job
from farm_core.settings import Timing
from orchestrator.submit import submit
from tests.integration import test_android_runner as plain_runs
from tests.support.farm import RecordingDispatcher, add_device, sqlite_engine, write_model
from worker_agent import consumer
from worker_agent.android import artifacts
from worker_agent.android.runner import AdbRunner, ToolOutputError, ToolTimeout
from worker_agent.android.simulator import debuggerd

pytestmark = pytest.mark.integration

# the adb runner's tests' fixtures: the real adb server, the tools, the phone factory
tools, phone = plain_runs.tools, plain_runs.phone  # adb_server: the conftest's
_tools_env, _spec = plain_runs._tools_env, plain_runs._spec

THREADTIME_FATAL = re.compile(
    r"^\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} +(\d+) +\1 F libc    : Fatal signal 11 \(SIGSEGV\), "
    r"code 1 \(SEGV_MAPERR\), fault addr 0x0 in tid \1 \(benchmark_model\), pid \1 "
    r"\(benchmark_model\)$",
    re.M,
)
ROOT = {"ro.debuggable": "1", "service.adb.root": "1"}


class Kept:
    """A store that keeps what a capture saved, by (job, attempt)."""

    def __init__(self) -> None:
        self.saved: dict[tuple[int, int], dict[str, NewArtifact]] = {}

    def __call__(self, job_id: int, attempt: int, items: list[NewArtifact]) -> None:
        self.saved[(job_id, attempt)] = {a.name: a for a in items}


def _run(runner: AdbRunner, spec, kept: Kept) -> None:
    """The runner's run with the capture around it, as runner.py's hook places it."""
    with artifacts.captured(runner, spec, kept):
        runner.run(spec)


def _root_profile() -> dict:
    from worker_agent.android.simulator import load_profile

    p = load_profile("pixel-7")
    return {"serial": p.serial, "props": p.props | ROOT, "gles": p.gles, "thermal": p.thermal,
            "cpu_khz": p.cpu_khz, "gpu": p.gpu}  # fmt: skip


def test_a_crashing_tool_leaves_logcat_its_signal_and_debuggerds_tombstone(phone, tmp_path) -> None:
    ph, runner = phone("pixel-7")
    debuggerd.arm(ph, "benchmark_model", "SIGSEGV", after_lines=3)
    spec = _spec(write_model(tmp_path / "m.tflite"), "gpu-fp32")
    kept = Kept()
    with pytest.raises(ToolOutputError) as e:
        _run(runner, spec, kept)
    assert e.value.log.endswith("Segmentation fault\n")  # the result keeps the output
    got = kept.saved[(1, 1)]
    assert set(got) == {"logcat.txt", "tombstone_from_logcat.txt", "crash.json",
                        "conditions.json"}  # fmt: skip
    assert THREADTIME_FATAL.search(got["logcat.txt"].data.decode())
    crash = json.loads(got["crash.json"].data)
    assert crash == {"signal": "SIGSEGV", "number": 11, "code": 1, "code_name": "SEGV_MAPERR",
                     "fault_addr": "0x0", "source": "logcat"}  # fmt: skip
    tomb = got["tombstone_from_logcat.txt"].data.decode()
    assert tomb.startswith(debuggerd.BANNER + "\n")
    assert "signal 11 (SIGSEGV), code 1 (SEGV_MAPERR), fault addr 0x0000000000000000\n" in tomb


def test_a_root_phones_tombstone_is_pulled_with_its_signal(phone, tmp_path) -> None:
    ph, runner = phone(_root_profile())
    debuggerd.arm(ph, "benchmark_model", "SIGILL")
    spec = _spec(write_model(tmp_path / "m.tflite"), "cpu")
    kept = Kept()
    with pytest.raises(ToolOutputError):
        _run(runner, spec, kept)
    got = kept.saved[(1, 1)]
    assert "tombstone_00" in got and "tombstone_from_logcat.txt" not in got
    assert got["tombstone_00"].data == ph.fs.read("/data/tombstones/tombstone_00")
    crash = json.loads(got["crash.json"].data)
    assert (crash["signal"], crash["number"], crash["source"]) == ("SIGILL", 4, "tombstone")


def test_an_older_tombstone_is_not_taken_for_this_runs(phone, tmp_path) -> None:
    ph, runner = phone(_root_profile())
    debuggerd.report(ph, ["/system/bin/app_process"], 99, debuggerd.SIGNALS["SIGABRT"])
    spec = _spec(write_model(tmp_path / "m.tflite"), "cpu", diff_runs=0)
    kept = Kept()
    _run(runner, spec, kept)
    assert not {n for n in kept.saved[(1, 1)] if n.startswith(("tombstone", "crash"))}


def test_a_clean_run_keeps_logcat_and_the_conditions_before_and_after(phone, tmp_path) -> None:
    ph, runner = phone("pixel-7")
    debuggerd.report(ph, ["/system/bin/app_process"], 99, debuggerd.SIGNALS["SIGABRT"])
    spec = _spec(write_model(tmp_path / "m.tflite"), "cpu", diff_runs=0)
    kept = Kept()
    _run(runner, spec, kept)
    got = kept.saved[(1, 1)]
    assert set(got) == {"logcat.txt", "conditions.json"}
    assert "Fatal signal" not in got["logcat.txt"].data.decode()  # cleared before the run
    cond = json.loads(got["conditions.json"].data)
    assert cond["before"]["thermal_c"] and cond["after"]["thermal_c"]
    assert cond["after"]["cpu_khz"]["cpu0"] > 0 and cond["after"]["at"] >= cond["before"]["at"]
    lines = ph.commands
    assert lines[0] == "logcat -c"
    assert lines[-1] == f"logcat -d -v threadtime -t {artifacts.LOGCAT_LINES}"


def test_a_retried_attempt_keeps_the_tools_output(phone, tmp_path) -> None:
    """A tool past its deadline is infrastructure's (retried, no result): the capture keeps
    what it printed."""
    ph, runner = phone("pixel-7", slow_s=30.0)
    spec = _spec(write_model(tmp_path / "m.tflite"), "cpu", tool_timeout_s=1.0)
    kept = Kept()
    with pytest.raises(ToolTimeout):
        _run(runner, spec, kept)
    out = kept.saved[(1, 1)]["tool_output.txt"].data.decode()
    assert out.startswith("STARTING!\n") and "Graph: [" in out


def test_a_capture_that_fails_never_changes_the_jobs_error(phone, tmp_path) -> None:
    ph, runner = phone("pixel-7")
    debuggerd.arm(ph, "benchmark_model", "SIGSEGV")
    spec = _spec(write_model(tmp_path / "m.tflite"), "cpu")

    def broken(*_: object) -> None:
        raise OSError("disk full")

    with pytest.raises(ToolOutputError), artifacts.captured(runner, spec, broken):
        runner.run(spec)


def test_a_crashing_job_through_the_executor_stores_its_artifacts(
    phone, tmp_path, monkeypatch
) -> None:
    from worker_agent.executor import execute_job

    ph, runner = phone("pixel-7")
    engine = sqlite_engine(tmp_path)
    add_device(engine, runner.device.key, kind="android")
    submit(engine, RecordingDispatcher(), [write_model(tmp_path / "m.tflite")],
           f"key={runner.device.key}", "cpu")  # fmt: skip
    ctx = consumer.ConsumerContext(runner.device, f"sqlite:///{tmp_path / 'farm.db'}",
                                   "unused://", "w1", timing=Timing(canary_every_jobs=1000),
                                   cache_dir=tmp_path / "cache")  # fmt: skip
    ctx.__dict__["runner"] = runner
    ctx.__dict__["dispatcher"] = RecordingDispatcher()
    monkeypatch.setattr(consumer, "_CONTEXT", ctx)
    debuggerd.arm(ph, "benchmark_model", "SIGSEGV", after_lines=2)
    with engine.begin() as c:
        job_id = c.execute(select(Job.id)).scalar_one()
    assert execute_job(ctx, job_id, 1) == FAILED
    with engine.begin() as c:
        listed = {i.name: i for i in stored.listing(c, job_id)}
        _, output = stored.fetch(c, job_id, 1, stored.TOOL_OUTPUT)
        _, crash = stored.fetch(c, job_id, 1, "crash.json")
    assert set(listed) == {"logcat.txt", "tombstone_from_logcat.txt", "crash.json",
                           "conditions.json", "tool_output.txt"}  # fmt: skip
    assert listed["tool_output.txt"].note == "as stored with the job's result"
    assert output.decode().endswith("Segmentation fault\n")
    assert json.loads(crash)["signal"] == "SIGSEGV"
