"""What submission refused is kept with the campaign (orchestrator.refusals, migration
0011) and `results --delegates` shows that record, not the devices' facts of today; a
campaign from before the record says it has none."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import insert, inspect, update

from devicefarm.commands.results import delegate_report
from farm_core.database import MIGRATIONS_DIR, make_engine, migrate
from farm_core.device_support import HEXAGON_MISSING
from farm_core.schema import Campaign, Device
from orchestrator.refusals import NOT_RECORDED, refusal, stored
from orchestrator.report import campaign_rows
from orchestrator.submit import submit
from tests.support.farm import (
    RecordingDispatcher,
    add_device,
    finish_jobs,
    sqlite_engine,
    write_model,
)

HEXAGON = {"interface": "/vendor/lib64/libhexagon_interface.so",
           "skel_dir": "/vendor/lib/rfsa/adsp", "skel": ["libhexagon_nn_skel.so"]}  # fmt: skip


def _facts(hexagon: dict) -> dict:
    return {"accelerators": {"gpu_backends": ["gl"], "nnapi_devices": [], "hexagon": hexagon}}


def _farm(tmp_path: Path):
    engine = sqlite_engine(tmp_path)
    add_device(engine, "android:p4", "android", facts=_facts(HEXAGON))
    add_device(engine, "android:a14", "android", facts=_facts({}))
    sub = submit(engine, RecordingDispatcher(), [write_model(tmp_path / "m.tflite")], "all",
                 "cpu,hexagon")  # fmt: skip
    finish_jobs(engine)
    return engine, sub


def test_submission_keeps_its_refusals_with_the_campaign(tmp_path: Path) -> None:
    engine, sub = _farm(tmp_path)
    why = f"hexagon: {HEXAGON_MISSING} (no libhexagon_interface.so, libhexagon_nn_skel*.so)"
    assert sub.warnings == [f"refused hexagon on android:a14: {why}"]
    with engine.begin() as conn:
        assert stored(conn, sub.campaign_id) == [refusal("android:a14", "hexagon", why)]


def test_comparison_shows_the_record_not_the_facts_of_today(tmp_path: Path) -> None:
    engine, sub = _farm(tmp_path)
    with engine.begin() as conn:  # the phone got its libraries after the campaign ran
        conn.execute(update(Device).where(Device.key == "android:a14")
                     .values(facts=_facts(HEXAGON)))  # fmt: skip
    text = delegate_report(engine, sub.campaign_id, campaign_rows(engine, sub.campaign_id))
    assert "refused: hexagon on android:a14: hexagon: Could not create Hexagon" in text


def test_refusals_of_a_device_without_any_job_are_shown(tmp_path: Path) -> None:
    engine = sqlite_engine(tmp_path)
    add_device(engine, "android:p4", "android", facts=_facts(HEXAGON))
    add_device(engine, "android:a14", "android", facts=_facts({}))
    sub = submit(engine, RecordingDispatcher(), [write_model(tmp_path / "m.tflite")], "all",
                 "hexagon")  # fmt: skip
    finish_jobs(engine)
    rows = campaign_rows(engine, sub.campaign_id)
    assert {r["device"] for r in rows} == {"android:p4"}
    assert "refused: hexagon on android:a14: " in delegate_report(engine, sub.campaign_id, rows)


def test_campaign_from_before_the_record_says_so(tmp_path: Path) -> None:
    engine, sub = _farm(tmp_path)
    with engine.begin() as conn:
        conn.execute(update(Campaign).values(refusals=None))
    text = delegate_report(engine, sub.campaign_id, campaign_rows(engine, sub.campaign_id))
    assert text.endswith(NOT_RECORDED)
    assert "refused:" not in text


def test_migration_0011_leaves_older_campaigns_without_a_record(tmp_path: Path) -> None:
    from alembic import command
    from alembic.config import Config

    engine = make_engine(f"sqlite:///{tmp_path / 'old.db'}")
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0010")
        conn.exec_driver_sql(
            "insert into campaigns (name, selector, configs, models, settings, priority, "
            "cancelled, gate, project, owner, created_at) values ('old', 'all', '[\"cpu\"]', "
            "'[]', '{}', 0, 0, '{}', 'default', '', '2026-01-01 00:00:00')"
        )
    assert "refusals" not in {c["name"] for c in inspect(engine).get_columns("campaigns")}
    migrate(engine)
    with engine.begin() as conn:
        assert stored(conn, 1) is None
        conn.execute(insert(Campaign).values(selector="all", configs=[], models=[],
                                             settings={}, refusals=[]))  # fmt: skip
        assert stored(conn, 2) == []
