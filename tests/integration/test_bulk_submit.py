"""A large campaign's fast paths on PostgreSQL and Redis against their plain paths (issue
44: 100,000 jobs in at most 30 s): jobs made by the server (orchestrator.submit_jobs), each
device's next jobs in one statement (farm_core.device_queue), jobs taken by id per attempt
(farm_core.jobs.take_many) and messages sent in Redis pipelines (farm_core.dispatch)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine, insert, select, update

from farm_core import device_queue, jobs
from farm_core.database import open_database
from farm_core.dispatch import SEND_BATCH, CeleryDispatcher, SendOrder
from farm_core.schema import DISPATCHED, QUEUED, Campaign, Job, StoredModel, utcnow
from orchestrator import submit_jobs
from orchestrator.probes import redis_probe
from orchestrator.submit import submit
from tests.support.farm import RecordingDispatcher, add_device, write_model

pytestmark = pytest.mark.integration

MODELS = [("a" * 64, "a.tflite"), ("b" * 64, "b.tflite"), ("c" * 64, "c.tflite")]
PLACES = [("noop:d1", "cpu"), ("noop:d2", "cpu"), ("noop:d2", "gpu-fp16"), ("noop:d3", "cpu")]
#: Job columns that say what a job is (not which row it is).
WHAT = ("model_sha256", "model_name", "project", "config", "planned_device", "device_key",
        "state", "attempt", "failures", "priority", "worker", "reason", "created_at")  # fmt: skip


def _campaign(engine: Engine, owner: str = "") -> int:
    now = utcnow()
    with engine.begin() as conn:
        have = set(conn.execute(select(StoredModel.sha256)).scalars())
        new = [dict(sha256=s, name=n, size_bytes=1, op_summary={}, data=b"x", created_at=now)
               for s, n in MODELS if s not in have]  # fmt: skip
        if new:
            conn.execute(insert(StoredModel), new)
        return conn.execute(
            insert(Campaign)
            .values(name="c", selector="kind=noop", configs=["cpu"], models=[], settings={},
                    priority=0, project="default", owner=owner, refusals=[], created_at=now)
            .returning(Campaign.id)
        ).scalar_one()  # fmt: skip


def _store(engine: Engine, on_server: bool, priority: int = 0, owner: str = "") -> list[int]:
    cid = _campaign(engine, owner)
    now = utcnow()
    shared = dict(campaign_id=cid, project="default", priority=priority, created_at=now,
                  updated_at=now)  # fmt: skip
    with engine.begin() as conn:
        return submit_jobs.store(conn, MODELS, PLACES, shared, on_server=on_server)


@pytest.fixture
def engine(pg_url: str):
    engine = open_database(pg_url)
    for key in ("noop:d1", "noop:d2", "noop:d3"):
        add_device(engine, key)
    yield engine
    engine.dispose()


def test_jobs_made_by_the_server_are_the_rows_the_plain_path_sends(engine: Engine) -> None:
    sent = _store(engine, on_server=False)
    made = _store(engine, on_server=True)
    cols = [Job.__table__.c[c] for c in WHAT]
    with engine.connect() as conn:
        rows = {i: tuple(r) for i, *r in conn.execute(select(Job.id, *cols).order_by(Job.id))}
    assert len(sent) == len(made) == len(MODELS) * len(PLACES)
    assert [rows[i][:6] for i in made] == [rows[i][:6] for i in sent]
    assert made == sorted(made) and min(made) > max(sent)  # ids ascend model-major
    expected = [(s, n, "default", c, k, k) for s, n in MODELS for k, c in PLACES]
    assert [rows[i][:6] for i in made] == expected
    assert {rows[i][6:12] for i in made} == {(QUEUED, 1, 0, 0, "", "")}


def test_one_statement_picks_each_groups_next_jobs_as_the_plain_path(engine: Engine) -> None:
    _store(engine, on_server=True, priority=0)
    _store(engine, on_server=True, priority=5, owner="ann")
    _store(engine, on_server=False, priority=2)
    with engine.begin() as conn:  # a few jobs no longer queued, one at a later attempt
        conn.execute(update(Job).where(Job.id.in_([2, 15, 40])).values(state=DISPATCHED))
        conn.execute(update(Job).where(Job.id == 17).values(attempt=3))
    groups = [(k, "default", o) for k in ("noop:d1", "noop:d2", "noop:d3") for o in ("", "ann")]
    groups.append(("noop:d4", "default", ""))  # a device with nothing queued
    room = {"noop:d1": 2, "noop:d2": 5, "noop:d3": 8, "noop:d4": 3}
    with engine.connect() as conn:
        one = device_queue._next_jobs(conn, groups, room, one_statement=True)
        plain = device_queue._next_jobs(conn, groups, room, one_statement=False)
    assert {g: v for g, v in one.items() if v} == {g: v for g, v in plain.items() if v}
    assert [w.job_id for w in one[("noop:d1", "default", "")]] == [25, 29]  # priority 2 first
    assert len(one[("noop:d2", "default", "")]) == 5
    assert not one.get(("noop:d4", "default", ""))


@pytest.mark.parametrize("db", ["postgresql", "sqlite"])
def test_take_many_takes_only_queued_jobs_at_their_attempt(
    db: str, pg_url: str, tmp_path: Path
) -> None:
    url = pg_url if db == "postgresql" else f"sqlite:///{tmp_path / 'farm.db'}"
    engine = open_database(url)
    for key in ("noop:d1", "noop:d2", "noop:d3"):
        add_device(engine, key)
    ids = _store(engine, on_server=False)
    with engine.begin() as conn:
        conn.execute(update(Job).where(Job.id == ids[1]).values(attempt=2))
        conn.execute(update(Job).where(Job.id == ids[2]).values(state=DISPATCHED))
    picks = [(ids[0], 1), (ids[1], 2), (ids[2], 1), (ids[3], 2), (ids[4], 1), (10**6, 1)]
    with engine.begin() as conn:
        taken = jobs.take_many(conn, picks, utcnow())
    assert taken == {(ids[0], 1), (ids[1], 2), (ids[4], 1)}
    with engine.connect() as conn:
        states = {i: s for i, s in conn.execute(select(Job.id, Job.state))}
    assert [states[i] for i in ids[:5]] == [DISPATCHED, DISPATCHED, DISPATCHED, QUEUED, DISPATCHED]
    engine.dispose()


def test_batched_sends_put_each_message_in_redis_once(redis_url: str) -> None:
    n = 2 * SEND_BATCH + 7
    orders = [SendOrder(i, 1 + i % 2, f"noop:d{i % 13}", i % 10) for i in range(1, n + 1)]
    dispatcher = CeleryDispatcher(redis_url)
    try:
        sent, error = dispatcher.send(orders)
    finally:
        dispatcher.close()
    assert (sent, error) == (orders, "")
    import redis

    client = redis.Redis.from_url(redis_url)
    lists = [k for k in client.scan_iter("df.*") if client.type(k) == b"list"]
    assert sum(client.llen(k) for k in lists) == n
    assert redis_probe(redis_url)() == {f"df-job-{o.job_id}-{o.attempt}" for o in orders}


def test_an_unreachable_broker_sends_nothing_and_says_why() -> None:
    dispatcher = CeleryDispatcher("redis://127.0.0.1:1/0")
    try:
        sent, error = dispatcher.send([SendOrder(1, 1, "noop:d1")])
    finally:
        dispatcher.close()
    assert sent == [] and error


def test_a_campaign_on_postgresql_is_stored_then_sent_up_to_each_queue(
    pg_url: str, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv(device_queue.ENV_QUEUE_DEPTH, "2")
    engine = open_database(pg_url)
    for i in range(5):
        add_device(engine, f"noop:d{i}")
    paths = [write_model(tmp_path / f"m{i}.tflite", 1.0 + i) for i in range(3)]
    dispatcher = RecordingDispatcher()
    sub = submit(engine, dispatcher, paths, "kind=noop", "cpu")
    assert (sub.jobs, sub.sent) == (15, 10)
    with engine.connect() as conn:
        rows = conn.execute(select(Job.id, Job.model_name, Job.device_key, Job.state)).all()
    # model-major ids: each device's queue took the first two models' jobs
    assert {r.id for r in rows if r.state == DISPATCHED} == {o.job_id for o in dispatcher.sent}
    assert {r.model_name for r in rows if r.state == DISPATCHED} == {"m0.tflite", "m1.tflite"}
    assert sorted(r.device_key for r in rows if r.state == QUEUED) == [
        f"noop:d{i}" for i in range(5)
    ]
    engine.dispose()
