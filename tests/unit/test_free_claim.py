"""The one-statement claim of a job nothing holds (farm_core.free_claim) against the plain
claim, on the same farm in each case: the same job claimed, held or refused, the same row
after, and the device's health read with it where the fast path took the job."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, select, update

from farm_core import jobs, quotas, reservations
from farm_core.schema import QUARANTINED, RUNNING, Device, Job
from tests.support.farm import add_device, sqlite_engine
from tests.support.projects import queued_campaign

T0 = datetime(2030, 1, 1, 9, 0)
ROW = (Job.state, Job.attempt, Job.worker, Job.reason, Job.lease_expires_at, Job.started_at)


def plain(engine: Engine) -> None:
    pass


def reserved_by_others(engine: Engine) -> None:
    with engine.begin() as c:
        reservations.reserve(c, "noop:a", "ana", "lab", T0, T0 + timedelta(hours=1), now=T0)


def reserved_by_its_project(engine: Engine) -> None:
    with engine.begin() as c:
        reservations.reserve(c, "noop:a", "ana", "team", T0, T0 + timedelta(hours=1), now=T0)


def reservation_over(engine: Engine) -> None:
    with engine.begin() as c:
        start = T0 - timedelta(hours=2)
        reservations.reserve(c, "noop:a", "ana", "lab", start, T0, now=start)


def quota_room(engine: Engine) -> None:
    with engine.begin() as c:
        quotas.add(c, "team", max_concurrent_jobs=5)


def quota_full(engine: Engine) -> None:
    with engine.begin() as c:
        quotas.add(c, "team", max_concurrent_jobs=1)
        c.execute(update(Job).where(Job.id == 2).values(state=RUNNING, worker="other"))


def quarantined(engine: Engine) -> None:
    with engine.begin() as c:
        c.execute(update(Device).where(Device.key == "noop:a").values(health=QUARANTINED))


def already_running_here(engine: Engine) -> None:  # a redelivery to its own worker
    with engine.begin() as c:
        c.execute(update(Job).where(Job.id == 1).values(state=RUNNING, worker="w"))


CASES: dict[str, tuple[Callable[[Engine], None], int]] = {
    "free": (plain, 1),
    "stale attempt": (plain, 2),
    "reserved by others": (reserved_by_others, 1),
    "reserved by its project": (reserved_by_its_project, 1),
    "reservation over": (reservation_over, 1),
    "quota with room": (quota_room, 1),
    "quota full": (quota_full, 1),
    "device quarantined": (quarantined, 1),
    "running here already": (already_running_here, 1),
}
#: Cases the one statement takes; the rest fall through to the plain path.
TAKEN_FAST = {"free", "reservation over", "device quarantined"}


def farm_for(folder: Path, case: str) -> Engine:
    engine = sqlite_engine(folder)
    add_device(engine, "noop:a")
    queued_campaign(engine, folder / "m", "team", 2, "key=noop:a")  # jobs 1 and 2
    CASES[case][0](engine)
    return engine


@pytest.mark.parametrize("case", list(CASES))
def test_the_fast_claim_decides_as_the_plain_one(tmp_path: Path, case: str) -> None:
    attempt = CASES[case][1]
    got = {}
    for fast in (True, False):
        engine = farm_for(tmp_path / str(fast), case)
        with engine.begin() as c:
            claimed = jobs.claim(c, 1, attempt, "w", 60, now=T0, fast=fast)
            row = c.execute(select(*ROW).where(Job.id == 1)).one()
        got[fast] = (claimed, tuple(row))
    (fast_claim, fast_row), (plain_claim, plain_row) = got[True], got[False]
    assert fast_row == plain_row
    assert (fast_claim is None) == (plain_claim is None)
    if plain_claim is not None:
        assert fast_claim.job_id == plain_claim.job_id == 1
        assert (fast_claim.attempt, fast_claim.device_key) == (attempt, "noop:a")
        assert plain_claim.device_health is None  # not read: the executor reads it
        assert (fast_claim.device_health is not None) == (case in TAKEN_FAST)


def test_the_fast_claim_reads_the_devices_health(tmp_path: Path) -> None:
    engine = farm_for(tmp_path, "device quarantined")
    with engine.begin() as c:
        claimed = jobs.claim(c, 1, 1, "w", 60, now=T0)
    assert claimed is not None and claimed.device_health == QUARANTINED
