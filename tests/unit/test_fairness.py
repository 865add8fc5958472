"""Fair shares between projects: a device's next jobs, and each device's queue depth."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import select

from farm_core import device_queue
from farm_core.fairness import Share, pick
from farm_core.schema import DISPATCHED, QUEUED, Job
from tests.support.farm import RecordingDispatcher, add_device, sqlite_engine
from tests.support.projects import projects_of, queued_campaign, run

NOW = datetime(2025, 6, 1, 12, 0)


def test_the_project_with_fewer_jobs_out_goes_first() -> None:
    queues = {"big": list(range(100)), "small": [1000, 1001, 1002]}
    shares = {"big": Share(out=8), "small": Share()}
    got = pick(queues, lambda j: 0, shares, 6, NOW)
    assert got[:3] == [1000, 1001, 1002]  # small's turn until it has as many out
    assert got[3:] == [0, 1, 2]


def test_equal_shares_take_turns() -> None:
    queues = {"a": [1, 2, 3], "b": [11, 12, 13]}
    got = pick(queues, lambda j: 0, {"a": Share(), "b": Share()}, 6, NOW)
    assert got == [1, 11, 2, 12, 3, 13]


def test_priority_comes_before_fair_share() -> None:
    queues = {"a": [(9, 1)], "b": [(0, 2), (0, 3)]}
    got = pick(queues, lambda j: j[0], {"a": Share(out=50), "b": Share()}, 3, NOW)
    assert got == [(9, 1), (0, 2), (0, 3)]


def test_a_project_takes_no_more_than_its_room() -> None:
    queues = {"a": [1, 2, 3], "b": [11]}
    got = pick(queues, lambda j: 0, {"a": Share(room=1), "b": Share()}, 5, NOW)
    assert sorted(got) == [1, 11]


@pytest.fixture
def farm(tmp_path: Path, monkeypatch):
    monkeypatch.setenv(device_queue.ENV_QUEUE_DEPTH, "2")
    engine = sqlite_engine(tmp_path)
    add_device(engine, "noop:a")
    return engine


def test_a_device_holds_its_queue_depth_and_is_filled_as_jobs_end(farm, tmp_path) -> None:
    queued_campaign(farm, tmp_path / "m", "default", 5, "key=noop:a")
    d = RecordingDispatcher()
    first = device_queue.fill(farm, d, ["noop:a"])
    assert len(first.sent) == 2  # the depth: the other 3 wait in the database
    assert device_queue.fill(farm, d, ["noop:a"]).sent == []  # full
    run(farm, first.sent[:1])
    again = device_queue.fill(farm, d, ["noop:a"])
    assert [o.job_id for o in again.sent] == [3]  # in order, one place freed
    with farm.begin() as c:
        states = c.execute(select(Job.state).order_by(Job.id)).scalars().all()
    assert states == ["succeeded", DISPATCHED, DISPATCHED, QUEUED, QUEUED]


def test_ten_jobs_of_one_project_are_not_starved_by_a_big_one(farm, tmp_path) -> None:
    queued_campaign(farm, tmp_path / "big", "big", 40, "key=noop:a")
    d = RecordingDispatcher()
    run(farm, device_queue.fill(farm, d, ["noop:a"]).sent)  # big starts alone
    queued_campaign(farm, tmp_path / "small", "small", 3, "key=noop:a")
    order: list[int] = []
    while True:
        sent = device_queue.fill(farm, d, ["noop:a"]).sent
        if not sent:
            break
        order += [o.job_id for o in sent]
        run(farm, sent)
    projects = projects_of(farm, order)
    assert len(order) == 40 - 2 + 3
    last_small = max(i for i, p in enumerate(projects) if p == "small")
    assert last_small < 8, projects  # before: after all 40 of big's


def test_a_failed_send_puts_the_jobs_back_in_the_queue(farm, tmp_path) -> None:
    queued_campaign(farm, tmp_path / "m", "default", 3, "key=noop:a")
    out = device_queue.fill(farm, RecordingDispatcher(broken="down"), ["noop:a"])
    assert out.sent == [] and out.broker_error == "down"
    with farm.begin() as c:
        assert set(c.execute(select(Job.state)).scalars()) == {QUEUED}
    assert len(device_queue.fill(farm, RecordingDispatcher(), ["noop:a"]).sent) == 2


def test_queue_depth_is_checked(monkeypatch) -> None:
    from delegate_runtime.errors import UsageError

    monkeypatch.setenv(device_queue.ENV_QUEUE_DEPTH, "zero")
    with pytest.raises(UsageError, match="DEVICEFARM_QUEUE_DEPTH"):
        device_queue.queue_depth()
