"""farm_core.artifacts: a job attempt's artifacts stored with their bounds, listed with the
tool's output that the job's result already keeps (served from there, not copied)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

from farm_core import artifacts, jobs
from farm_core.artifacts import NewArtifact
from farm_core.schema import FAILED, Artifact, Job
from orchestrator.submit import submit
from tests.support.farm import RecordingDispatcher, add_device, sqlite_engine, write_model


@pytest.fixture
def job(tmp_path: Path) -> tuple[Engine, int]:
    """A farm with one queued job on a noop device."""
    engine = sqlite_engine(tmp_path)
    add_device(engine, "noop:a")
    submit(engine, RecordingDispatcher(), [write_model(tmp_path / "m.tflite")], "key=noop:a",
           "cpu")  # fmt: skip
    with engine.begin() as c:
        return engine, c.execute(select(Job.id)).scalar_one()


def _fail(engine: Engine, job_id: int, log: str, profile_log: str = "") -> None:
    with engine.begin() as c:
        jobs.claim(c, job_id, 1, "w", 60)
        values = {"error": "ToolOutputError: no result", "log": log,
                  "benchmark": {"profile_log": profile_log} if profile_log else {}}  # fmt: skip
        jobs.finish(c, job_id, 1, "w", FAILED, values)


def test_a_small_artifact_is_kept_whole(job) -> None:
    engine, job_id = job
    with engine.begin() as c:
        artifacts.save(c, job_id, 1, [NewArtifact("logcat", "logcat.txt", b"line\n")])
        info, data = artifacts.fetch(c, job_id, 1, "logcat.txt")
    assert data == b"line\n"
    assert (info.size_bytes, info.stored_bytes, info.truncated, info.note) == (5, 5, False, "")


def test_a_log_over_the_bound_keeps_its_tail_and_says_so(job) -> None:
    engine, job_id = job
    with engine.begin() as c:
        item = NewArtifact("logcat", "logcat.txt", b"a" * 90 + b"CRASH12345", keep="tail")
        artifacts.save(c, job_id, 1, [item], limit=10)
        info, data = artifacts.fetch(c, job_id, 1, "logcat.txt")
    assert data == b"CRASH12345"
    assert info.truncated and info.size_bytes == 100 and info.stored_bytes == 10
    assert info.note == "truncated: the last 10 of 100 bytes kept"


def test_a_tombstone_over_the_bound_keeps_its_head(job) -> None:
    engine, job_id = job
    with engine.begin() as c:
        item = NewArtifact("tombstone", "tombstone_00", b"signal 11" + b"x" * 50, note="pulled")
        artifacts.save(c, job_id, 1, [item], limit=9)
        info, data = artifacts.fetch(c, job_id, 1, "tombstone_00")
    assert data == b"signal 11"
    assert info.note == "pulled; truncated: the first 9 of 59 bytes kept"


def test_saving_the_same_name_again_replaces_it(job) -> None:
    engine, job_id = job
    with engine.begin() as c:
        artifacts.save(c, job_id, 1, [NewArtifact("logcat", "logcat.txt", b"one")])
        artifacts.save(c, job_id, 1, [NewArtifact("logcat", "logcat.txt", b"two")])
        count = c.execute(select(func.count()).select_from(Artifact)).scalar()
        _, data = artifacts.fetch(c, job_id, 1, "logcat.txt")
    assert (count, data) == (1, b"two")


def test_a_name_from_a_phone_becomes_a_plain_file_name() -> None:
    assert artifacts.safe_name("/data/tombstones/../tomb stone;1") == "tomb_stone_1"
    assert artifacts.safe_name("..") == "artifact"


def test_the_tool_output_is_listed_from_the_result_not_copied(job) -> None:
    engine, job_id = job
    _fail(engine, job_id, "STARTING!\nSegmentation fault\n", profile_log="profiled\n")
    with engine.begin() as c:
        names = [(i.attempt, i.name, i.kind) for i in artifacts.listing(c, job_id)]
        stored = c.execute(select(func.count()).select_from(Artifact)).scalar()
        _, data = artifacts.fetch(c, job_id, 1, artifacts.TOOL_OUTPUT)
    assert names == [(1, "tool_output.txt", "tool_output"), (1, "tool_output_profile.txt",
                                                               "tool_output")]  # fmt: skip
    assert stored == 0
    assert data == b"STARTING!\nSegmentation fault\n"


def test_an_unknown_artifact_is_none(job) -> None:
    engine, job_id = job
    with engine.begin() as c:
        assert artifacts.fetch(c, job_id, 1, "logcat.txt") is None
        assert artifacts.fetch(c, job_id + 1, 1, "logcat.txt") is None


def test_the_project_of_a_job(job) -> None:
    engine, job_id = job
    assert artifacts.job_project(engine, job_id) == "default"
    assert artifacts.job_project(engine, job_id + 1) is None
