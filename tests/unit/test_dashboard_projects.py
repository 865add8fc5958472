"""Dashboard pages show the logged-in viewer's projects only (issue 42): on the seeded demo
farm, the SSD model's campaigns and results move to project `vision`; a `default` member
logged in with their token no longer sees them on any page, a `vision` member sees only
them, an admin sees both (streamlit.testing AppTest, as test_dashboard_pages)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import require_module

require_module("streamlit", "streamlit (the dashboard extra)")
from sqlalchemy import insert, select, update  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from dashboard import queries  # noqa: E402
from devicefarm.demo_lab import seed  # noqa: E402
from farm_core.accounts import Accounts, save_accounts  # noqa: E402
from farm_core.schema import Campaign, Job, Result, StoredModel  # noqa: E402
from tests.support.farm import sqlite_engine  # noqa: E402

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
TIMEOUT_S = 60
SSD = "ssd_mobilenet_v2.tflite"
ENV = ("DEVICEFARM_DB", "DEVICEFARM_TOKENS", "DEVICEFARM_DASHBOARD_READ_ONLY")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """The demo farm with SSD's jobs and campaigns in project vision, and a tokens file:
    dora (read, default), vic (submit, vision), ada (admin)."""
    folder = Path(tmp_path_factory.mktemp("dash-projects"))
    engine = sqlite_engine(folder)
    seed(engine)
    ssd = _move_to_vision(engine, SSD)
    accounts = Accounts().set_user("dora", projects={"default": "read"})
    accounts = accounts.set_user("vic", projects={"vision": "submit"})
    accounts = accounts.set_user("ada", admin=True)
    tokens = {}
    for name in ("dora", "vic", "ada"):
        accounts, _, tokens[name] = accounts.add_token(name)
    save_accounts(accounts, folder / "tokens.json")
    saved = {k: os.environ.get(k) for k in ENV}
    os.environ["DEVICEFARM_DB"] = f"sqlite:///{folder / 'farm.db'}"
    os.environ["DEVICEFARM_TOKENS"] = str(folder / "tokens.json")
    os.environ.pop("DEVICEFARM_DASHBOARD_READ_ONLY", None)
    yield {"engine": engine, "tokens": tokens, "ssd": ssd}
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def _move_to_vision(engine, model: str) -> str:
    """Move `model`'s jobs and results out of each demo campaign into a campaign of its
    own in project vision (the demo's campaigns run every model); its sha256."""
    with engine.begin() as conn:
        sha = conn.execute(select(StoredModel.sha256).where(StoredModel.name == model)).scalar()
        ids = conn.execute(select(Job.campaign_id).where(Job.model_sha256 == sha).distinct())
        for (campaign_id,) in ids.all():
            old = conn.execute(select(Campaign).where(Campaign.id == campaign_id)).one()
            new = conn.execute(
                insert(Campaign)
                .values(
                    name=f"{old.name} (vision)", selector=old.selector, configs=old.configs,
                    models=[sha], settings=old.settings, priority=old.priority,
                    project="vision", owner="vic", created_at=old.created_at,
                )
                .returning(Campaign.id)
            ).scalar_one()  # fmt: skip
            jobs = select(Job.id).where(Job.campaign_id == campaign_id, Job.model_sha256 == sha)
            conn.execute(update(Result).where(Result.job_id.in_(jobs)).values(campaign_id=new))
            conn.execute(
                update(Job)
                .where(Job.campaign_id == campaign_id, Job.model_sha256 == sha)
                .values(campaign_id=new, project="vision")
            )
    return sha


def page(lab: dict, who: str, name: str) -> AppTest:
    """Page `name` as user `who`, logged in with their token in the app's login field."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.run()
    at.text_input(key="password").input(lab["tokens"][who]).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title and at.title[0].value == "Fleet", [e.value for e in at.error]
    at.switch_page(f"views/{name}.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def model_options(at: AppTest) -> list[str]:
    return list(at.selectbox(key="model").options)


@pytest.mark.parametrize("name", ["compare", "accuracy", "op_coverage"])
@pytest.mark.parametrize(
    ("who", "ssd_seen", "others_seen"),
    [("dora", False, True), ("vic", True, False), ("ada", True, True)],
)
def test_model_pages_list_the_viewers_projects_models_only(
    lab: dict, name: str, who: str, ssd_seen: bool, others_seen: bool
) -> None:
    options = model_options(page(lab, who, name))
    assert any("ssd" in o for o in options) is ssd_seen, options
    assert any("mobilenet_v1" in o for o in options) is others_seen, options


@pytest.mark.parametrize(
    ("who", "ssd_seen", "others_seen"),
    [("dora", False, True), ("vic", True, False), ("ada", True, True)],
)
def test_history_lists_the_viewers_projects_models_only(
    lab: dict, who: str, ssd_seen: bool, others_seen: bool
) -> None:
    options = model_options(page(lab, who, "history"))
    assert any("ssd" in o for o in options) is ssd_seen, options
    assert any("mobilenet_v1" in o for o in options) is others_seen, options


@pytest.mark.parametrize(
    ("who", "projects"),
    [("dora", {"default"}), ("vic", {"vision"}), ("ada", {"default", "vision"})],
)
def test_campaigns_lists_the_viewers_projects_campaigns_only(
    lab: dict, who: str, projects: set[str]
) -> None:
    at = page(lab, who, "campaigns")
    table = at.dataframe[0].value
    assert set(table["project"]) == projects


def test_a_read_member_gets_no_submission_form(lab: dict) -> None:
    at = page(lab, "dora", "campaigns")
    assert "read-only" in " ".join(str(c.value) for c in at.caption)
    assert not at.get("file_uploader")


def test_a_submitter_submits_only_to_their_projects(lab: dict) -> None:
    at = page(lab, "vic", "campaigns")
    assert list(at.selectbox(key="project").options) == ["vision"]


@pytest.mark.parametrize(
    ("who", "ssd_seen", "others_seen"),
    [("dora", False, True), ("vic", True, False), ("ada", True, True)],
)
def test_compatibility_shows_the_viewers_projects_models_only(
    lab: dict, who: str, ssd_seen: bool, others_seen: bool
) -> None:
    at = page(lab, who, "compatibility")
    options = list(at.selectbox(key="allowlist_model").options)
    assert any("ssd" in o for o in options) is ssd_seen, options
    assert any("mobilenet_v1" in o for o in options) is others_seen, options


def test_the_fleet_hides_another_projects_running_job(lab: dict) -> None:
    """The demo's running jobs are the SSD re-run's, now vision's."""

    def running(who: str) -> list[str]:
        return sorted(set(page(lab, who, "fleet").dataframe[0].value["current_job"]) - {""})

    named = running("ada")
    assert named and all(SSD in j for j in named)
    assert running("vic") == named
    assert running("dora") == [queries.OTHER_PROJECT_JOB]


def test_queries_of_another_project_see_nothing(lab: dict) -> None:
    engine, ssd = lab["engine"], lab["ssd"]
    assert queries.compare(engine, ssd, ("default",)) == []
    assert queries.accuracy(engine, ssd, ("default",)) == []
    assert queries.op_coverage(engine, ssd, ("default",)) == []
    assert ssd not in queries.allowlists(engine, _thresholds(), projects=("default",))
    assert queries.compare(engine, ssd, ("vision",)) == queries.compare(engine, ssd)


def _thresholds():
    from orchestrator.allowlist.rules import Thresholds

    return Thresholds()
