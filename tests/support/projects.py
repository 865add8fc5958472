"""Helpers for the quota, fair-share and reservation tests: campaigns of a project, queued
and unsent, and jobs run through the real claim and finish transitions."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from sqlalchemy import Engine, select, update

from farm_core import jobs
from farm_core.dispatch import SendOrder
from farm_core.schema import SUCCEEDED, Campaign, Job
from orchestrator.submit import RunSettings, submit
from tests.support.farm import RecordingDispatcher, write_model

#: A broker that takes nothing: the campaign's jobs stay queued until a test fills.
HELD_BROKER = "ConnectionError: the test holds every job"


def in_project(engine: Engine, campaign_id: int, project: str, owner: str = "") -> None:
    """Put a campaign and its jobs in `project` (as submission does once it takes one)."""
    with engine.begin() as c:
        c.execute(
            update(Campaign).where(Campaign.id == campaign_id).values(project=project, owner=owner)
        )
        c.execute(update(Job).where(Job.campaign_id == campaign_id).values(project=project))


def queued_campaign(
    engine: Engine,
    folder: Path,
    project: str,
    n_models: int,
    selector: str,
    configs: str = "cpu",
    owner: str = "",
    priority: int = 0,
) -> int:
    """A campaign of `n_models` models in `project`, every job queued (nothing sent)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [write_model(folder / f"{project}-{i}.tflite", 1.0 + i) for i in range(n_models)]
    sub = submit(
        engine,
        RecordingDispatcher(broken=HELD_BROKER),
        paths,
        selector,
        configs,
        RunSettings(num_runs=1, diff_runs=0),
        priority,
        name=f"{project} campaign",
    )
    in_project(engine, sub.campaign_id, project, owner)
    return sub.campaign_id


def run(engine: Engine, orders: Sequence[SendOrder], now: datetime | None = None) -> None:
    """Claim and finish each sent job as its worker would."""
    for o in orders:
        with engine.begin() as c:
            assert jobs.claim(c, o.job_id, o.attempt, f"w-{o.device_key}", 60, now=now)
            jobs.finish(c, o.job_id, o.attempt, f"w-{o.device_key}", SUCCEEDED, {}, now=now)


def projects_of(engine: Engine, ids: Sequence[int]) -> list[str]:
    with engine.begin() as c:
        got = dict(c.execute(select(Job.id, Job.project).where(Job.id.in_(list(ids)))).all())
    return [got[i] for i in ids]
