"""The reconciler: lost messages, expired leases, silent devices, with reasons."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select, update

from farm_core import jobs
from farm_core.celery_app import queue_for
from farm_core.device_queue import idle_with_jobs_queued, queue_depth
from farm_core.schema import DISPATCHED, QUEUED, SUCCEEDED, TIMED_OUT, Device, Job, utcnow
from farm_core.settings import Timing
from orchestrator.reconciler import reconcile
from orchestrator.submit import submit
from tests.support.farm import (
    RecordingDispatcher,
    add_device,
    lost_device_farm,
    sqlite_engine,
    write_model,
)

TIMING = Timing(dispatch_grace_s=0, offline_after_s=30, device_gone_s=300)
LATER = timedelta(seconds=1)


@pytest.fixture
def farm(tmp_path: Path):
    engine = sqlite_engine(tmp_path)
    add_device(engine, "noop:a")
    add_device(engine, "noop:b")
    submit(engine, RecordingDispatcher(), [write_model(tmp_path / "m.tflite")], "key=noop:a", "cpu")
    return engine


def job_row(engine):
    with engine.begin() as c:
        return c.execute(select(Job)).one()


def test_lost_message_is_sent_again(farm) -> None:
    d = RecordingDispatcher()
    report = reconcile(farm, d, lambda queues=None: set(), TIMING, now=utcnow() + LATER)
    assert report.resent_lost_message == [1]
    assert [(o.device_key, o.attempt) for o in d.sent] == [("noop:a", 2)]
    row = job_row(farm)
    assert (row.state, row.attempt) == (DISPATCHED, 2)


def test_message_still_in_broker_is_left_alone(farm) -> None:
    d = RecordingDispatcher()
    report = reconcile(farm, d, lambda queues=None: {"df-job-1-1"}, TIMING, now=utcnow() + LATER)
    assert not report.changed() and d.sent == []


def test_the_probe_reads_only_the_queues_holding_a_dispatch_past_the_grace(tmp_path) -> None:
    engine = sqlite_engine(tmp_path)
    for key in ("noop:a", "noop:b", "noop:c"):
        add_device(engine, key)
    model = write_model(tmp_path / "m.tflite")
    submit(engine, RecordingDispatcher(), [model], "key=noop:a", "cpu")
    submit(engine, RecordingDispatcher(), [model], "key=noop:b", "cpu")
    with engine.begin() as c:  # b's job runs, within its lease: nothing to look for
        jobs.claim(c, 2, 1, "w1", lease_s=600)
    asked = []
    probe = lambda queues=None: asked.append(queues) or {"df-job-1-1"}  # noqa: E731
    report = reconcile(engine, RecordingDispatcher(), probe, TIMING, now=utcnow() + LATER)
    assert asked == [[queue_for("noop:a")]] and report.probed == 1 and not report.changed()


def test_probe_that_cannot_tell_sends_nothing(farm) -> None:
    d = RecordingDispatcher()
    assert not reconcile(farm, d, lambda queues=None: None, TIMING, now=utcnow() + LATER).changed()


def test_expired_lease_moves_the_job_and_counts_a_failure(farm) -> None:
    with farm.begin() as c:
        jobs.claim(c, 1, 1, "w1", lease_s=1)
    d = RecordingDispatcher()
    report = reconcile(
        farm, d, lambda queues=None: set(), TIMING, now=utcnow() + timedelta(seconds=5)
    )
    assert report.lease_expired == [1]
    row = job_row(farm)
    assert (row.state, row.attempt, row.failures) == (DISPATCHED, 2, 1)
    assert "lease expired" in row.reason


def test_silent_device_goes_offline_and_its_job_moves(farm) -> None:
    with farm.begin() as c:
        c.execute(
            update(Device)
            .where(Device.key == "noop:a")
            .values(last_seen=utcnow() - timedelta(seconds=60))
        )
    # widen the selector so that noop:b matches
    from farm_core.schema import Campaign

    with farm.begin() as c:
        c.execute(update(Campaign).values(selector="kind=noop"))
    d = RecordingDispatcher()
    report = reconcile(farm, d, lambda queues=None: {"df-job-1-1"}, TIMING)
    assert report.went_offline == ["noop:a"]
    assert report.moved_off_lost_device == [1]
    assert d.sent[0].device_key == "noop:b"


def test_job_of_a_device_that_never_comes_back_expires_with_the_reason(farm) -> None:
    with farm.begin() as c:
        c.execute(update(Device).values(last_seen=utcnow() - timedelta(seconds=60)))
    d = RecordingDispatcher()
    reconcile(farm, d, lambda queues=None: {"df-job-1-1"}, TIMING)
    row = job_row(farm)
    assert row.state == QUEUED and "offline" in row.reason
    report = reconcile(
        farm, d, lambda queues=None: set(), TIMING, now=utcnow() + timedelta(seconds=400)
    )
    row = job_row(farm)
    assert report.expired == [1] and row.state == TIMED_OUT
    assert "no heartbeat since" in row.reason and "expired after waiting" in row.reason
    assert d.sent == []


def test_queued_job_is_placed_when_its_device_returns(farm) -> None:
    d = RecordingDispatcher(broken="down")
    with farm.begin() as c:
        c.execute(update(Job).values(state=QUEUED))
    reconcile(
        farm, d, lambda queues=None: set(), TIMING, now=utcnow() + LATER
    )  # broker down: still queued
    assert job_row(farm).state == QUEUED
    d.broken = ""
    report = reconcile(farm, d, lambda queues=None: set(), TIMING, now=utcnow() + LATER)
    assert report.placed == [1] and job_row(farm).state == DISPATCHED


STALL = timedelta(seconds=TIMING.stall_after_s + 1)


def _alive_at(engine, when) -> None:
    with engine.begin() as c:
        c.execute(update(Device).values(last_seen=when))


def test_device_that_claims_nothing_while_its_message_waits_is_quarantined(farm) -> None:
    """Issue 16 point 1: a consumer that stopped consuming, its device online."""
    later = utcnow() + STALL
    _alive_at(farm, later)
    report = reconcile(
        farm, RecordingDispatcher(), lambda queues=None: {"df-job-1-1"}, TIMING, now=later
    )
    assert report.stalled == ["noop:a"]
    with farm.begin() as c:
        health, why = c.execute(
            select(Device.health, Device.health_reason).where(Device.key == "noop:a")
        ).one()
    assert health == "quarantined" and why.startswith("stalled: job 1 waiting on its queue")
    row = job_row(farm)
    assert (row.state, row.attempt) == (QUEUED, 2) and "noop:a quarantined" in row.reason


def test_device_that_claimed_recently_is_not_stalled(farm) -> None:
    later = utcnow() + STALL
    _alive_at(farm, later)
    with farm.begin() as c:
        c.execute(update(Job).values(started_at=later - timedelta(seconds=5)))
    report = reconcile(
        farm, RecordingDispatcher(), lambda queues=None: {"df-job-1-1"}, TIMING, now=later
    )
    assert report.stalled == []


def test_message_not_in_the_broker_is_a_lost_message_not_a_stall(farm) -> None:
    later = utcnow() + STALL
    _alive_at(farm, later)
    report = reconcile(farm, RecordingDispatcher(), lambda queues=None: set(), TIMING, now=later)
    assert report.stalled == [] and report.resent_lost_message == [1]


# -- queued jobs on lost devices, placed in sets (issue 44) ------------------------------


def _lost_farm(tmp_path: Path, jobs_count: int, others: int):
    """lost_device_farm on a new SQLite database."""
    return lost_device_farm(sqlite_engine(tmp_path), tmp_path, jobs_count, others)


def _statements(engine) -> list[str]:
    from sqlalchemy import event

    seen: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *a: seen.append(a[2]))
    return seen


def test_queued_jobs_of_a_lost_device_move_in_one_statement(tmp_path) -> None:
    """Before: a transaction of 6+ statements per job (6,667 jobs: 27-33 s a pass), then a
    statement per device the jobs went to (751 jobs, 751 devices: 8.3 s of a fleet pass)."""
    engine = _lost_farm(tmp_path, 60, others=2)
    seen = _statements(engine)
    reconcile(
        engine, RecordingDispatcher(), lambda queues=None: set(), TIMING, now=utcnow() + LATER
    )
    moves = [s for s in seen if s.startswith("UPDATE jobs SET device_key=")]
    assert len(moves) == 1, moves  # each job's device by a CASE on its id
    with engine.begin() as c:
        where = dict(c.execute(select(Job.device_key, func.count()).group_by(Job.device_key)).all())
        attempts = set(c.execute(select(Job.attempt)).scalars())
    assert where == {"noop:o0": 30, "noop:o1": 30}  # spread by load, as one by one did
    assert attempts == {2}  # a new attempt each, as jobs.place makes


def test_queued_jobs_with_no_device_wait_then_expire_in_one_statement(tmp_path) -> None:
    engine = _lost_farm(tmp_path, 40, others=0)
    reconcile(
        engine, RecordingDispatcher(), lambda queues=None: set(), TIMING, now=utcnow() + LATER
    )
    with engine.begin() as c:
        reasons = set(c.execute(select(Job.reason)).scalars())
    assert len(reasons) == 1 and reasons.pop().endswith(jobs.WAITING)
    seen = _statements(engine)
    later = utcnow() + timedelta(seconds=TIMING.device_gone_s + 60)
    report = reconcile(engine, RecordingDispatcher(), lambda queues=None: set(), TIMING, now=later)
    assert sorted(report.expired) == list(range(1, 41))
    expiring = [s for s in seen if "SET state=" in s and "finished_at" in s]
    assert len(expiring) == 1, expiring  # one statement (executed for the 40 rows)
    with engine.begin() as c:
        states = set(c.execute(select(Job.state)).scalars())
        reason = c.execute(select(Job.reason).where(Job.id == 1)).scalar_one()
    assert states == {TIMED_OUT} and "expired after waiting" in reason


def test_a_job_that_failed_on_a_device_goes_to_another_first(tmp_path) -> None:
    from farm_core.schema import Attempt

    engine = _lost_farm(tmp_path, 2, others=2)
    with engine.begin() as c:
        c.execute(
            Attempt.__table__.insert().values(
                job_id=1, attempt=0, device_key="noop:o0", worker="w", outcome="device_error",
                reason="crashed", at=utcnow(),
            )
        )  # fmt: skip
    reconcile(
        engine, RecordingDispatcher(), lambda queues=None: set(), TIMING, now=utcnow() + LATER
    )
    with engine.begin() as c:
        where = dict(c.execute(select(Job.id, Job.device_key)).all())
    assert where[1] == "noop:o1"


def test_lost_messages_are_queued_again_in_a_statement_per_attempt(tmp_path) -> None:
    """A pass that found 4,916 lost messages placed them a transaction each (233 s, the
    fleet bench under load); now one UPDATE and one INSERT of attempt records, and the
    device's fill sends them as their next attempt."""
    from farm_core.schema import Attempt

    engine = sqlite_engine(tmp_path)
    add_device(engine, "noop:a")
    models = [write_model(tmp_path / f"m{i}.tflite", scale=1.0 + i) for i in range(30)]
    submit(engine, RecordingDispatcher(), models, "key=noop:a", "cpu")
    with engine.begin() as c:
        c.execute(update(Job).values(state=DISPATCHED, dispatched_at=utcnow() - LATER))
    seen = _statements(engine)
    d = RecordingDispatcher()
    report = reconcile(engine, d, lambda queues=None: set(), TIMING, now=utcnow() + LATER)
    assert report.resent_lost_message == list(range(1, 31))
    requeued = [s for s in seen if s.startswith("UPDATE jobs SET state=") and "attempt=" in s]
    assert len(requeued) == 1, requeued
    assert len([s for s in seen if s.startswith("INSERT INTO attempts")]) == 1
    with engine.begin() as c:
        lost = c.execute(select(Attempt.job_id, Attempt.attempt, Attempt.outcome)).all()
        states = c.execute(select(Job.state, Job.attempt, func.count()).group_by(Job.state)).all()
    assert sorted(lost) == [(i, 1, "message_lost") for i in range(1, 31)]
    assert {(o.attempt) for o in d.sent} == {2}  # the fill sends the next attempt
    assert {(s, a) for s, a, _ in states} <= {(DISPATCHED, 2), (QUEUED, 2)}


def test_dispatched_jobs_of_a_lost_device_move_in_a_few_statements(tmp_path) -> None:
    """Before: jobs.place per job, a transaction each (237 jobs: 13.4 s of a fleet pass);
    then an UPDATE back to queued and a move as queued ones; now each job written once,
    dispatched straight to queued on its new device, and one INSERT of their attempts."""
    from farm_core.schema import Attempt

    engine = _lost_farm(tmp_path, 60, others=2)
    with engine.begin() as c:
        c.execute(update(Job).values(state=DISPATCHED, dispatched_at=utcnow() - LATER))
    seen = _statements(engine)
    d = RecordingDispatcher()
    report = reconcile(engine, d, lambda queues=None: set(), TIMING, now=utcnow() + LATER)
    writes = [s for s in seen if s.startswith("UPDATE jobs SET") and "lease_expires_at" in s]
    assert len(writes) == 1, [w[:60] for w in writes]  # the fill's own come after
    assert "state=" in writes[0] and "device_key=CASE" in writes[0]
    assert len([s for s in seen if s.startswith("INSERT INTO attempts")]) == 1
    assert sorted(report.moved_off_lost_device) == list(range(1, 61))
    with engine.begin() as c:
        where = dict(c.execute(select(Job.device_key, func.count()).group_by(Job.device_key)).all())
        noted = c.execute(select(Attempt.attempt, Attempt.outcome, Attempt.reason)).all()
        reasons = set(c.execute(select(Job.reason)).scalars())
    assert where == {"noop:o0": 30, "noop:o1": 30}
    assert {(a, o) for a, o, _ in noted} == {(1, "device_lost")} and len(noted) == 60
    assert all("noop:lost offline (no heartbeat since" in r for _, _, r in noted)
    assert len(reasons) == 1 and "noop:lost offline" in reasons.pop()
    assert {o.attempt for o in d.sent} == {2}  # the fill sends them as their next attempt


def test_dispatched_jobs_no_device_takes_wait_written_once(tmp_path) -> None:
    """Off a lost device with no other to take them: queued at their next attempt in the
    one write, their reason the device's and that they wait, their attempts noted."""
    from farm_core.schema import Attempt

    engine = _lost_farm(tmp_path, 20, others=0)
    with engine.begin() as c:
        c.execute(update(Job).values(state=DISPATCHED, dispatched_at=utcnow() - LATER))
    seen = _statements(engine)
    report = reconcile(
        engine, RecordingDispatcher(), lambda queues=None: set(), TIMING, now=utcnow() + LATER
    )
    writes = [s for s in seen if s.startswith("UPDATE jobs SET") and "lease_expires_at" in s]
    assert len(writes) == 1, [w[:60] for w in writes]
    assert report.moved_off_lost_device == []  # onto no other device: they wait
    with engine.begin() as c:
        rows = set(c.execute(select(Job.state, Job.attempt, Job.device_key, Job.reason)).all())
        noted = c.execute(select(Attempt.attempt, Attempt.outcome)).all()
    assert len(rows) == 1
    state, attempt, device, reason = rows.pop()
    assert (state, attempt, device) == (QUEUED, 2, "noop:lost")
    assert reason.startswith("device noop:lost offline (no heartbeat since")
    assert reason.endswith(f"; {jobs.WAITING}")
    assert sorted(noted) == [(1, "device_lost")] * 20


def test_a_pass_reads_no_job_that_waits_its_turn_on_a_live_device(tmp_path) -> None:
    """A backlog queued on live devices is the fill's: reading all 10,000 of a fleet's
    active jobs took 0.6-0.7 s of a pass under load. Read: running jobs past their lease,
    jobs on a device not live, dispatched ones past the grace, queued ones on a reserved
    device."""
    from orchestrator.reconciler import _may_need_work

    engine = _lost_farm(tmp_path, 30, others=2)  # jobs 1-30 queued on noop:lost (silent)
    models = [write_model(tmp_path / f"w{i}.tflite", scale=9.0 + i) for i in range(20)]
    submit(engine, RecordingDispatcher(), models, "key=noop:o0", "cpu")  # jobs 31-50
    now = utcnow()
    with engine.begin() as c:
        c.execute(update(Job).where(Job.id > 30).values(state=QUEUED, updated_at=now))
        c.execute(update(Job).where(Job.id == 31).values(state=DISPATCHED))
        assert jobs.claim(c, 31, 1, "w", 600) is not None  # running
        fresh, old = now, now - timedelta(seconds=60)
        c.execute(update(Job).where(Job.id == 32).values(state=DISPATCHED, dispatched_at=fresh))
        c.execute(update(Job).where(Job.id == 33).values(state=DISPATCHED, dispatched_at=old))
        c.execute(update(Job).where(Job.id == 34).values(device_key="noop:o1"))
    live, grace = ["noop:o0", "noop:o1"], now - timedelta(seconds=30)

    def read_at(reserved: list[str], at: datetime) -> set[int]:
        with engine.begin() as c:
            got = c.execute(select(Job.id).where(_may_need_work(live, reserved, grace, at)))
            return set(got.scalars())

    read = read_at([], now)
    assert read == set(range(1, 31)) | {33}  # not 31 (in its lease), 32 (fresh), 34-50
    assert read_at(["noop:o1"], now) == read | {34}
    assert read_at([], now + timedelta(seconds=601)) == read | {31}  # its lease expired


# -- a pass's budget: bulk work in parts, the rest the next pass's (issue 44) -------------


def test_a_spent_budget_leaves_the_next_steps_to_the_next_passes(tmp_path) -> None:
    """With no budget a pass runs its first move step (the jobs off the lost device, all
    of them) and leaves relocation, counted, to the next pass, which leaves the fill to
    the one after; every job moves once."""

    engine = _lost_farm(tmp_path, 60, others=2)
    with engine.begin() as c:  # 20 of the lost device's jobs dispatched, 40 queued
        c.execute(update(Job).where(Job.id <= 20).values(state=DISPATCHED, dispatched_at=utcnow()))
    spent = Timing(dispatch_grace_s=0, offline_after_s=30, device_gone_s=300, pass_budget_s=0)
    d = RecordingDispatcher()
    # a probe that cannot tell: no message the fill sent is taken for lost
    first, second, third = (
        reconcile(engine, d, lambda queues=None: None, spent, now=utcnow() + LATER)
        for _ in range(3)
    )
    assert sorted(first.moved_off_lost_device) == list(range(1, 21))
    assert first.deferred == {"relocate": 40, "fill": 2} and first.moves_left()
    assert first.sent == 0  # a pass that moved leaves the fill to the next
    assert not second.moved_off_lost_device and second.deferred == {"fill": 2}
    assert second.sent == 0
    assert third.sent == 2 * queue_depth() and third.deferred == {}  # two devices filled
    with engine.begin() as c:
        where = dict(c.execute(select(Job.device_key, func.count()).group_by(Job.device_key)).all())
        attempts = set(c.execute(select(Job.attempt)).scalars())
    assert where == {"noop:o0": 30, "noop:o1": 30}
    assert attempts == {2}  # each moved once


def test_a_lost_host_s_jobs_move_in_parts_placing_read_once(tmp_path, monkeypatch) -> None:
    """The jobs off lost devices move in parts, a transaction each, within the pass's
    budget: with none, the first part (the pass's first move) and the rest counted for the
    next pass, which moves them; what placing needs (the live devices) read once a pass."""
    from sqlalchemy import event

    from farm_core.schema import Attempt
    from orchestrator import reconciler

    monkeypatch.setattr(reconciler, "OFF_LOST_PART", 8)
    engine = _lost_farm(tmp_path, 20, others=2)
    with engine.begin() as c:
        c.execute(update(Job).values(state=DISPATCHED, dispatched_at=utcnow()))
    seen: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *a: seen.append(a[2]))
    spent = Timing(dispatch_grace_s=0, offline_after_s=30, device_gone_s=300, pass_budget_s=0)
    first = reconcile(
        engine, RecordingDispatcher(), lambda queues=None: None, spent, now=utcnow() + LATER
    )
    assert sorted(first.moved_off_lost_device) == list(range(1, 9))  # by device, then id
    assert first.deferred == {"off lost devices": 12, "fill": 2} and first.moves_left()
    ample = Timing(dispatch_grace_s=0, offline_after_s=30, device_gone_s=300, pass_budget_s=60)
    seen.clear()
    second = reconcile(
        engine, RecordingDispatcher(), lambda queues=None: None, ample, now=utcnow() + LATER
    )
    assert sorted(second.moved_off_lost_device) == list(range(9, 21))
    assert second.deferred == {}
    live_reads = [  # relocation's read of every live device, whole rows
        q for q in seen if "devices.facts" in q and "WHERE devices.state = " in q
    ]
    assert len(live_reads) == 1, live_reads  # for both parts, not per part
    with engine.begin() as c:
        attempts = c.execute(select(Job.attempt, func.count()).group_by(Job.attempt)).all()
        noted = c.execute(select(func.count()).select_from(Attempt)).scalar_one()
    assert attempts == [(2, 20)] and noted == 20  # each moved once, its attempt noted once


def test_a_pass_within_its_budget_takes_every_step(tmp_path) -> None:
    engine = _lost_farm(tmp_path, 60, others=2)
    with engine.begin() as c:
        c.execute(update(Job).where(Job.id <= 20).values(state=DISPATCHED, dispatched_at=utcnow()))
    ample = Timing(dispatch_grace_s=0, offline_after_s=30, device_gone_s=300, pass_budget_s=60)
    report = reconcile(
        engine, RecordingDispatcher(), lambda queues=None: None, ample, now=utcnow() + LATER
    )
    assert sorted(report.moved_off_lost_device) == list(range(1, 21))
    assert report.deferred == {} and report.sent > 0


def test_the_command_says_what_a_pass_left_for_the_next() -> None:
    from devicefarm.commands.reconcile import summary
    from orchestrator.reconciler import ReconcileReport

    report = ReconcileReport(moved_off_lost_device=[1, 2], deferred={"off lost devices": 35})
    line = summary(report)
    assert "2 job(s) moved off a lost device: 1, 2" in line
    assert "left for the next pass (its budget spent): 35 off lost devices" in line


def test_only_jobs_left_to_move_call_for_the_next_pass_at_once() -> None:
    from orchestrator.reconciler import ReconcileReport

    assert ReconcileReport(deferred={"relocate": 3, "fill": 250}).moves_left()
    assert not ReconcileReport(deferred={"fill": 250}).moves_left()
    assert not ReconcileReport().moves_left()


def test_a_pass_fills_only_idle_devices(tmp_path) -> None:
    """An agent fills its own device's queue after each job that leaves it its last one;
    a pass tops up a device holding a job no further (it had sent 100-490 jobs a pass in
    a 1,000-device fleet, and raced the agents for the rest), fills an idle one to the
    queue's depth, and leaves one with no job queued for it alone."""
    engine = sqlite_engine(tmp_path)
    add_device(engine, "noop:a")
    models = [write_model(tmp_path / f"m{n}.tflite", scale=1.0 + n) for n in range(12)]
    submit(engine, RecordingDispatcher(), models, "key=noop:a", "cpu")

    def finish(count: int) -> None:
        with engine.begin() as c:
            ids = c.execute(
                select(Job.id).where(Job.state == DISPATCHED).order_by(Job.id).limit(count)
            ).scalars()
            c.execute(update(Job).where(Job.id.in_(list(ids))).values(state=SUCCEEDED))

    probe = lambda queues=None: {f"df-job-{n}-1" for n in range(1, 13)}  # noqa: E731 - every message held
    finish(queue_depth() - 1)  # its last job left: its agent fills it when that one ends
    d = RecordingDispatcher()
    assert reconcile(engine, d, probe, TIMING).sent == 0 and d.sent == []
    finish(1)  # none left: its agent will not
    with engine.begin() as c:
        assert idle_with_jobs_queued(c) == {"noop:a"}
    report = reconcile(engine, d, probe, TIMING)
    assert report.sent == 12 - queue_depth() and len(d.sent) == 12 - queue_depth()
    finish(12)  # every job done, none queued: nothing to fill, its queue left alone
    with engine.begin() as c:
        assert idle_with_jobs_queued(c) == set()
