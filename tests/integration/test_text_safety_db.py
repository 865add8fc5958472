"""A tool that prints NUL bytes or bytes that are not UTF-8 loses nothing: its job ends
with its reason, raw log and figures stored (escaped) on real PostgreSQL and on SQLite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from farm_core import jobs
from farm_core.database import open_database
from farm_core.schema import FAILED, RUNNING, Attempt, Job, Result
from farm_core.settings import Timing
from orchestrator.submit import submit
from tests.support.farm import RecordingDispatcher, add_device, write_model

pytestmark = pytest.mark.integration

#: What a crashing phone tool prints: NUL bytes and a byte (0xff) that is not UTF-8.
RAW = b"INFO: Loaded model\x00\x00\nSegmentation fault \xff\xfe at 0x0\n"
ERROR = "ToolOutputError: benchmark_model gave no result: \x00garbage"
#: The same, as a runner decodes it (surrogateescape keeps the bytes that are not UTF-8).
LOG = RAW.decode("utf-8", "surrogateescape")
BENCHMARK = {
    "avg_us": 12.5,
    "raw_tail": "count=\x00 \udcff",
    "notes": ["ok", "nul\x00"],
    "per_key\x00": {"inner": "\udce9t\x00"},
}
STORED_LOG = "INFO: Loaded model\\x00\\x00\nSegmentation fault \\xff\\xfe at 0x0\n"
STORED_ERROR = "ToolOutputError: benchmark_model gave no result: \\x00garbage"
STORED_BENCHMARK = {
    "avg_us": 12.5,
    "raw_tail": "count=\\x00 \\xff",
    "notes": ["ok", "nul\\x00"],
    "per_key\\x00": {"inner": "\\xe9t\\x00"},
}


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request, tmp_path: Path) -> Iterator[Engine]:
    """A migrated, empty farm database with one job running on `noop:a` (attempt 1)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'farm.db'}"
    else:
        url = request.getfixturevalue("pg_url")
    eng = open_database(url)
    add_device(eng, "noop:a")
    add_device(eng, "noop:b")
    submit(eng, RecordingDispatcher(), [write_model(tmp_path / "m.tflite")], "kind=noop", "cpu")
    with eng.begin() as conn:
        job_id = conn.execute(select(Job.id).order_by(Job.id)).scalars().first()
        assert jobs.claim(conn, job_id, 1, "w1", 60) is not None
    yield eng
    eng.dispose()


def _job_id(engine: Engine) -> int:
    with engine.begin() as conn:
        return conn.execute(select(Job.id).where(Job.state == RUNNING)).scalar_one()


def test_finish_stores_nul_and_invalid_utf8_escaped(engine: Engine) -> None:
    job_id = _job_id(engine)
    result = {"error": ERROR, "log": LOG, "benchmark": BENCHMARK, "avg_us": 12.5}
    with engine.begin() as conn:
        assert jobs.finish(conn, job_id, 1, "w1", FAILED, result)
    with engine.begin() as conn:
        job = conn.execute(select(Job.state, Job.reason).where(Job.id == job_id)).one()
        row = conn.execute(select(Result).where(Result.job_id == job_id)).one()
    assert (job.state, job.reason) == (FAILED, STORED_ERROR)
    assert (row.error, row.log, row.benchmark) == (STORED_ERROR, STORED_LOG, STORED_BENCHMARK)
    assert row.avg_us == 12.5


def test_a_device_error_with_nul_moves_the_job_with_its_reason(engine: Engine) -> None:
    job_id = _job_id(engine)
    with engine.begin() as conn:
        order = jobs.place(
            conn,
            job_id,
            Timing(),
            expect_state=RUNNING,
            expect_attempt=1,
            outcome="device_error",
            reason="noop:a: DeviceError: sync failed: \x00\udcff",
            count_failure=True,
            prefer_other=True,
            worker="w1",
        )
    assert order is not None and order.device_key == "noop:b"
    want = "noop:a: DeviceError: sync failed: \\x00\\xff"
    with engine.begin() as conn:
        assert conn.execute(select(Job.reason).where(Job.id == job_id)).scalar_one() == want
        kept = conn.execute(select(Attempt.reason).where(Attempt.job_id == job_id)).scalar_one()
    assert kept == want
