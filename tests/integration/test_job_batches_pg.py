"""A batch's claims, leases, finishes and give-backs on PostgreSQL (farm_core.job_batches),
held to what the one-job statements write for the same jobs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from sqlalchemy import select, update

from farm_core import job_batches, jobs
from farm_core.database import make_engine
from farm_core.schema import QUEUED, RUNNING, SUCCEEDED, TIMED_OUT, Attempt, Job, Project, Result
from orchestrator.submit import submit
from tests.support.farm import RecordingDispatcher, add_device, write_model

pytestmark = pytest.mark.integration

RESULT = {
    "avg_us": 12.5,
    "median_us": 11.0,
    "p95_us": math.nan,  # a figure that is not a number is stored as one
    "init_us": 900.0,
    "max_avg_error": 1e-7,
    "delegated_ops": 3,
    "total_ops": 4,
    "benchmark": {"runs": 10, "peak_memory_mb": 12.0, "note": "caf\u00e9 \x00"},
    "diff": {"outputs": [{"avg_error": 1e-7}]},
    "delegation": {"nodes_delegated": 3},
    "device_facts": {"key": "noop:a"},
    "versions": {"runtime": "1"},
    "measurement": {"fingerprint": "f" * 16},
    "config_fingerprint": "f" * 16,
    "log": "line one\nline \x00two",
    "duration_s": 0.25,
    "error": "",
}


@pytest.fixture
def farm(pg_url: str, tmp_path: Path):
    engine = make_engine(pg_url)
    add_device(engine, "noop:a")
    models = [write_model(tmp_path / f"m{i}.tflite", 1.0 + i) for i in range(6)]
    sent = RecordingDispatcher()
    submit(engine, sent, models, "key=noop:a", "cpu")
    yield engine, [(o.job_id, o.attempt) for o in sent.sent]
    engine.dispose()


def stored(engine, job_id: int) -> dict:
    with engine.connect() as c:
        row = c.execute(select(Result).where(Result.job_id == job_id)).mappings().one()
    return {k: v for k, v in row.items() if k not in ("id", "job_id", "model_sha256", "created_at")}


def test_a_batch_is_claimed_and_finished_as_one_job_at_a_time_would_be(farm) -> None:
    engine, dispatches = farm
    one, *batch = dispatches[:4]
    with engine.begin() as c:
        assert jobs.claim(c, *one, "w1", 60.0) is not None
        assert jobs.finish(c, *one, "w1", SUCCEEDED, RESULT)
    with engine.begin() as c:
        claimed = job_batches.claim_many(c, batch, "w1", 60.0)
    assert [(j.job_id, j.attempt) for j in claimed] == batch
    assert {j.device_health for j in claimed} == {"unknown"}  # as add_device wrote it
    finishes = [job_batches.Finish(j, a, SUCCEEDED, RESULT) for j, a in batch[:2]]
    finishes.append(job_batches.Finish(*batch[2], TIMED_OUT, {**RESULT, "error": "late"}))
    with engine.begin() as c:
        assert job_batches.finish_many(c, finishes, "w1") == set(batch)
    for job_id, _ in batch[:2]:
        mine, theirs = stored(engine, job_id), stored(engine, one[0])
        assert math.isnan(mine.pop("p95_us")) and math.isnan(theirs.pop("p95_us"))
        assert mine == theirs
    with engine.connect() as c:
        ids = [j for j, _ in batch]
        states = dict(c.execute(select(Job.id, Job.state).where(Job.id.in_(ids))).all())
        late = c.execute(select(Job.reason).where(Job.id == batch[2][0])).scalar()
    assert [states[j] for j, _ in batch] == [SUCCEEDED, SUCCEEDED, TIMED_OUT]
    assert late == "late"
    with engine.begin() as c:  # once only, and only the claimer
        assert job_batches.finish_many(c, finishes, "w1") == set()


def test_only_the_claimer_renews_finishes_or_gives_back(farm) -> None:
    engine, dispatches = farm
    batch = dispatches[:3]
    with engine.begin() as c:
        assert len(job_batches.claim_many(c, batch, "w1", 60.0)) == 3
        assert job_batches.claim_many(c, batch, "w2", 60.0) == []  # held, leases alive
        assert job_batches.renew_many(c, batch, "w2", 60.0) == set()
        assert job_batches.renew_many(c, batch, "w1", 60.0) == set(batch)
        other = [job_batches.Finish(*batch[0], SUCCEEDED, RESULT)]
        assert job_batches.finish_many(c, other, "w2") == set()
        assert job_batches.release_many(c, batch[1:], "w2", "noop:a", "why") == []
        given = job_batches.release_many(c, batch[1:], "w1", "noop:a", "time limit")
    assert given == sorted(j for j, _ in batch[1:])
    with engine.connect() as c:
        rows = c.execute(
            select(Job.id, Job.state, Job.attempt, Job.failures).where(
                Job.id.in_([j for j, _ in batch])
            )
        ).all()
        noted = c.execute(select(Attempt.job_id, Attempt.outcome, Attempt.reason)).all()
    assert sorted(rows) == [
        (batch[0][0], RUNNING, batch[0][1], 0),
        (batch[1][0], QUEUED, batch[1][1] + 1, 0),
        (batch[2][0], QUEUED, batch[2][1] + 1, 0),
    ]
    assert sorted(noted) == [(j, job_batches.RELEASED, "time limit") for j, _ in batch[1:]]


def test_stale_and_held_dispatches_take_the_plain_claim(farm) -> None:
    engine, dispatches = farm
    (free, limited, stale) = dispatches[:3]
    with engine.begin() as c:
        c.execute(update(Job).where(Job.id == limited[0]).values(project="capped"))
        c.execute(Project.__table__.insert().values(name="capped", max_concurrent_jobs=5))
    with engine.begin() as c:
        claimed = job_batches.claim_many(c, [free, limited, (stale[0], stale[1] + 1)], "w1", 60.0)
    # the capped project's job is claimed on the plain path (its quota has room), the
    # message of an attempt the job never had is stale
    assert [(j.job_id, j.attempt) for j in claimed] == [free, limited]
