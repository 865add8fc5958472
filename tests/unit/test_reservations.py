"""Device reservations: overlaps refused, a reserved device starting only its holder's jobs
(at dispatch and at claim), the jobs of others moved or waiting until the end."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from delegate_runtime.errors import JobError
from farm_core import device_queue, jobs, reservations
from farm_core.schema import QUEUED, Job, utcnow
from farm_core.settings import Timing
from orchestrator.reconciler import reconcile
from tests.support.farm import RecordingDispatcher, add_device, sqlite_engine
from tests.support.projects import queued_campaign

T0 = datetime(2030, 1, 1, 9, 0)
HOUR = timedelta(hours=1)


@pytest.fixture
def farm(tmp_path: Path):
    engine = sqlite_engine(tmp_path)
    add_device(engine, "noop:a")
    add_device(engine, "noop:b")
    return engine


def reserve(engine, key="noop:a", start=T0, hours=2.0, project="lab", user="ana", **kw):
    with engine.begin() as c:
        return reservations.reserve(
            c, key, user, project, start, start + hours * HOUR, now=kw.pop("now", T0), **kw
        )


def test_overlapping_reservations_are_refused_with_the_holder(farm) -> None:
    first = reserve(farm, reason="power measurement")
    with pytest.raises(JobError) as err:
        reserve(farm, start=T0 + HOUR, project="speech", user="bo")
    assert str(err.value) == (
        "noop:a is already reserved from 2030-01-01 09:00 UTC until 2030-01-01 11:00 UTC by "
        f"ana (project lab) (reservation {first.id}): reservations of a device may not overlap"
    )
    reserve(farm, start=T0 + 2 * HOUR, project="speech")  # back to back is fine
    reserve(farm, key="noop:b", start=T0 + HOUR)  # another device is fine


@pytest.mark.parametrize(
    ("key", "start", "hours", "needle"),
    [
        ("noop:zz", T0, 1, "no device noop:zz (devices: noop:a, noop:b)"),
        ("noop:a", T0, -1, "ends (2030-01-01 08:00 UTC) before it starts"),
        ("noop:a", T0 - 3 * HOUR, 1, "it ends in the past"),
        ("noop:a", T0, 24 * 40, "longer than 31 days"),
    ],
)
def test_bad_reservations_say_why(farm, key, start, hours, needle) -> None:
    with pytest.raises(JobError, match=re.escape(needle)):
        reserve(farm, key=key, start=start, hours=hours)


def test_a_cancelled_reservation_frees_its_window(farm) -> None:
    held = reserve(farm)
    with farm.begin() as c:
        reservations.cancel(c, held.id, now=T0)
        with pytest.raises(JobError, match="was cancelled"):
            reservations.cancel(c, held.id, now=T0)
        assert reservations.listing(c, T0) == []
    reserve(farm, project="speech")


def test_a_reserved_device_sends_only_its_holders_jobs_until_the_end(farm, tmp_path) -> None:
    now = utcnow()
    reserve(farm, start=now - HOUR, hours=2, now=now)
    queued_campaign(farm, tmp_path / "o", "speech", 2, "key=noop:a")
    queued_campaign(farm, tmp_path / "l", "lab", 2, "key=noop:a")
    out = device_queue.fill(farm, RecordingDispatcher(), ["noop:a"], now)
    with farm.begin() as c:
        sent = {
            o.job_id: c.execute(select(Job.project).where(Job.id == o.job_id)).scalar()
            for o in out.sent
        }
        waiting = c.execute(select(Job.reason).where(Job.state == QUEUED)).scalars().all()
    assert sorted(sent.values()) == ["lab", "lab"]
    until = reservations.when(now + HOUR)
    assert waiting == [f"waiting: device noop:a reserved by ana (project lab) until {until}"] * 2
    later = now + HOUR + timedelta(minutes=1)  # the reservation is over
    after = device_queue.fill(farm, RecordingDispatcher(), ["noop:a"], later)
    assert len(after.sent) == 2
    with farm.begin() as c:
        assert set(c.execute(select(Job.reason)).scalars()) == {""}


def test_a_reservation_with_no_project_holds_for_its_user_alone(farm, tmp_path) -> None:
    now = utcnow()
    reserve(farm, start=now, project="", user="ana", now=now)
    queued_campaign(farm, tmp_path / "x", "default", 1, "key=noop:a")
    queued_campaign(farm, tmp_path / "y", "default", 1, "key=noop:a", owner="ana")
    out = device_queue.fill(farm, RecordingDispatcher(), ["noop:a"], now)
    assert [o.job_id for o in out.sent] == [2]


def test_a_message_sent_before_the_reservation_does_not_start(farm, tmp_path) -> None:
    queued_campaign(farm, tmp_path / "o", "speech", 1, "key=noop:a")
    (order,) = device_queue.fill(farm, RecordingDispatcher(), ["noop:a"]).sent
    now = utcnow()
    reserve(farm, start=now - timedelta(seconds=1), now=now)
    with farm.begin() as c:
        assert jobs.claim(c, order.job_id, order.attempt, "w", 60, now=now) is None
        row = c.execute(select(Job)).one()
    assert (row.state, row.attempt) == (QUEUED, order.attempt + 1)
    assert row.reason.startswith("waiting: device noop:a reserved by ana (project lab) until")


def test_the_reconciler_moves_others_jobs_to_a_free_device_of_the_same_hardware(
    farm, tmp_path
) -> None:
    now = utcnow()
    reserve(farm, start=now - HOUR, hours=2, now=now)
    campaign = queued_campaign(farm, tmp_path / "o", "speech", 3, "kind=noop")
    d = RecordingDispatcher()
    report = reconcile(farm, d, lambda queues=None: set(), Timing(dispatch_grace_s=0), now=now)
    with farm.begin() as c:
        rows = c.execute(
            select(Job.planned_device, Job.device_key, Job.state, Job.reason).where(
                Job.campaign_id == campaign
            )
        ).all()
    assert {r.device_key for r in rows} == {"noop:b"}  # noop:a's three moved
    assert len(report.placed) == 6 and {o.device_key for o in d.sent} == {"noop:b"}
    moved = [r for r in rows if r.planned_device == "noop:a"]
    assert all(r.reason.startswith("moved from noop:a: device noop:a reserved by") for r in moved)


def cli(*argv: str) -> int:
    from devicefarm.cli import main

    return main(list(argv))


def test_reserve_cli(farm, capsys) -> None:
    db = ["--db", str(farm.url)]
    assert (
        cli(
            "reserve",
            "noop:a",
            "--for",
            "2h",
            "--reason",
            "power run",
            "--project",
            "lab",
            "--user",
            "ana",
            *db,
        )
        == 0
    )
    out = capsys.readouterr().out
    assert out.startswith("reservation 1: noop:a held by ana (project lab) from ")
    assert cli("reserve", "noop:a", "--for", "30m", "--user", "bo", *db) == 1
    err = capsys.readouterr().err
    assert "noop:a is already reserved from" in err and "may not overlap" in err
    start = (utcnow() + 3 * HOUR).strftime("%Y-%m-%d %H:%M")
    assert cli("reserve", "noop:a", "--from", start, "--for", "1h30m", "--user", "bo", *db) == 0
    capsys.readouterr()
    assert cli("reservations", "list", *db) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["id", "1", "2"]
    assert " on " in lines[1] and "power run" in lines[1] and "to come" in lines[2]
    assert cli("reservations", "cancel", "1", *db) == 0
    assert cli("reservations", "cancel", "1", *db) == 1
    with pytest.raises(SystemExit) as usage:
        cli("reserve", "noop:a", "--for", "soon", *db)
    assert usage.value.code == 2
    assert "not a duration" in capsys.readouterr().err
