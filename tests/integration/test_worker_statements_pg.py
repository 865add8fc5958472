"""A device's per-job database work on PostgreSQL, on its one connection: the finish says how
many other jobs the device holds (the refill's count, no round trip of its own), and the
fill runs its transaction there, advisory locks and all, opening no other connection."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import event, func, select, text

from farm_core import device_queue, jobs
from farm_core.database import Statements, make_engine
from farm_core.schema import DISPATCHED, SUCCEEDED, Job, Result
from orchestrator.submit import submit
from tests.support.farm import RecordingDispatcher, add_device, write_model

PID = text("SELECT pg_backend_pid()")


def test_finish_counts_the_devices_other_jobs_out(pg_url: str, tmp_path: Path) -> None:
    engine = make_engine(pg_url)
    add_device(engine, "noop:a")
    add_device(engine, "noop:b")
    models = [write_model(tmp_path / f"m{i}.tflite", 1.0 + i) for i in range(5)]
    sent = RecordingDispatcher()
    submit(engine, sent, models, "key=noop:a|noop:b", "cpu")
    on_a = [o for o in sent.sent if o.device_key == "noop:a"]
    statements = Statements(engine)
    try:
        for done, order in enumerate(on_a, 1):
            claimed = statements.run(
                lambda c, o=order: jobs.claim(c, o.job_id, o.attempt, "w1", 60.0)
            )
            assert claimed is not None
            written, others = statements.run(
                lambda c, o=order: jobs.finish_counting(
                    c, o.job_id, o.attempt, "w1", SUCCEEDED, {"avg_us": 1.0}
                )
            )
            assert written
            assert others == len(on_a) - done  # noop:b's jobs not counted, nor this one
            with engine.connect() as c:
                out = device_queue.jobs_out(c, "noop:a")
            assert others == out
        again = statements.run(  # a second finish of one dispatch writes nothing
            lambda c: jobs.finish_counting(c, on_a[0].job_id, on_a[0].attempt, "w1", SUCCEEDED, {})
        )
        assert again == (False, None)
    finally:
        statements.close()
    with engine.connect() as c:
        assert c.execute(select(func.count()).select_from(Result)).scalar() == len(on_a)
    engine.dispose()


def test_a_fill_on_the_devices_connection_opens_no_other(pg_url: str, tmp_path: Path) -> None:
    engine = make_engine(pg_url, durable=False, pool=0)  # a consumer's: no pool
    add_device(engine, "noop:a")
    models = [write_model(tmp_path / f"m{i}.tflite", 1.0 + i) for i in range(20)]
    submit(engine, RecordingDispatcher(), models, "key=noop:a", "cpu")
    with engine.connect() as c:  # the submission's fill sent a queue's depth
        c.execute(Job.__table__.update().where(Job.state == DISPATCHED).values(state=SUCCEEDED))
        c.commit()
    statements = Statements(engine)
    admin = make_engine(pg_url, pool=0)
    opened: list[object] = []
    try:
        mine = statements.run(lambda c: c.execute(PID).scalar())
        event.listen(engine, "connect", lambda conn, _record: opened.append(conn))
        filled = device_queue.fill(engine, RecordingDispatcher(), ["noop:a"], statements=statements)
        assert len(filled.sent) == device_queue.queue_depth()
        assert filled.holding == {"noop:a": device_queue.queue_depth()}
        assert statements.run(lambda c: c.execute(PID).scalar()) == mine
        with admin.connect() as c:
            # committed: another session sees the jobs dispatched
            assert device_queue.jobs_out(c, "noop:a") == device_queue.queue_depth()
        # full: the next fill sends nothing
        assert (
            device_queue.fill(engine, RecordingDispatcher(), ["noop:a"], statements=statements).sent
            == []
        )
        # a broker that refuses: the jobs taken go back to queued, on the same connection
        with admin.connect() as c:
            c.execute(Job.__table__.update().where(Job.state == DISPATCHED).values(state=SUCCEEDED))
            c.commit()
        refused = device_queue.fill(
            engine, RecordingDispatcher(broken="down"), ["noop:a"], statements=statements
        )
        assert refused.sent == [] and refused.broker_error
        with admin.connect() as c:
            assert device_queue.jobs_out(c, "noop:a") == 0
        assert opened == []  # every statement above ran on the device's one connection
    finally:
        statements.close()
        admin.dispose()
        engine.dispose()
