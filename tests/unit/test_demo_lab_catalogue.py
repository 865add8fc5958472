"""The demo lab grown by a catalogue of models for benchmarks (demo_lab.seed's
`more_models`): the newest campaign runs every model, the older ones the demo's four, and
every model's result is stored as the farm stores one."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import distinct, func, select

from devicefarm.demo_lab import MODELS, extra_models, seed
from farm_core.schema import Campaign, Result, StoredModel
from tests.support.farm import sqlite_engine


def test_more_models_run_in_the_newest_campaign_only(tmp_path: Path) -> None:
    engine = sqlite_engine(tmp_path)
    summary = seed(engine, campaigns=2, running_campaign=False, more_models=3)
    assert len(summary.models) == len(MODELS) + 3
    with engine.connect() as conn:
        stored = conn.execute(select(func.count()).select_from(StoredModel)).scalar_one()
        per_campaign = dict(
            conn.execute(
                select(Result.campaign_id, func.count(distinct(Result.model_sha256)))
                .group_by(Result.campaign_id)
                .order_by(Result.campaign_id)
            ).all()
        )
        ids = conn.execute(select(Campaign.id).order_by(Campaign.id)).scalars().all()
    assert stored == len(MODELS) + 3
    assert [per_campaign[i] for i in ids] == [len(MODELS), len(MODELS) + 3]
    engine.dispose()


def test_extra_models_have_distinct_names_and_bytes() -> None:
    models = extra_models(40)
    assert len({m.name for m in models}) == 40 and len({m.scale for m in models}) == 40
    assert not {m.name for m in models} & {m.name for m in MODELS}
