"""The dashboard's debug artifacts (issue 45): the campaigns page offers a job's artifacts
for download, and the queries behind it show a job of the viewer's projects only."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import require_module

require_module("streamlit", "streamlit (the dashboard extra)")
from sqlalchemy import select  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from dashboard import queries  # noqa: E402
from devicefarm.demo_lab import seed  # noqa: E402
from farm_core import artifacts  # noqa: E402
from farm_core.artifacts import NewArtifact  # noqa: E402
from farm_core.schema import FAILED, TIMED_OUT, Job  # noqa: E402
from tests.support.farm import sqlite_engine  # noqa: E402

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
LOGCAT = b"01-02 12:34:56.789  4242  4242 F libc    : Fatal signal 11 (SIGSEGV)\n"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    """The demo farm; campaign 1's first failed job has a stored logcat."""
    folder = Path(tmp_path_factory.mktemp("dash-artifacts"))
    engine = sqlite_engine(folder)
    seed(engine)
    with engine.begin() as c:
        job = c.execute(
            select(Job.id)
            .where(Job.campaign_id == 1, Job.state.in_((FAILED, TIMED_OUT)))
            .order_by(Job.id)
        ).scalar()
        artifacts.save(c, job, 1, [NewArtifact("logcat", "logcat.txt", LOGCAT)])
    saved = {k: os.environ.get(k) for k in ("DEVICEFARM_DB", "DEVICEFARM_DASHBOARD_READ_ONLY")}
    os.environ["DEVICEFARM_DB"] = f"sqlite:///{folder / 'farm.db'}"
    os.environ.pop("DEVICEFARM_DASHBOARD_READ_ONLY", None)
    yield engine, job
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def test_a_campaigns_failed_jobs_come_first(lab) -> None:
    engine, job = lab
    assert queries.campaign_jobs(engine, 1)[0] == job


def test_a_jobs_artifacts_are_listed_and_their_bytes_read(lab) -> None:
    engine, job = lab
    names = [a["name"] for a in queries.job_artifacts(engine, job)]
    assert "logcat.txt" in names
    assert queries.artifact_bytes(engine, job, 1, "logcat.txt") == LOGCAT


def test_another_projects_viewer_sees_none(lab) -> None:
    engine, job = lab
    assert queries.job_artifacts(engine, job, ["vision"]) == []
    assert queries.artifact_bytes(engine, job, 1, "logcat.txt", ["vision"]) is None
    assert queries.campaign_jobs(engine, 1, ["vision"]) == []


def test_the_campaigns_page_offers_the_download(lab) -> None:
    _, job = lab
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/campaigns.py")
    at.run()
    at.selectbox(key="campaign").set_value(1).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="artifacts_job").value == job
    listed = "\n".join(str(m.value) for m in at.markdown)
    assert f"attempt 1 · logcat · `logcat.txt` · {len(LOGCAT)} bytes" in listed
    assert len(at.get("download_button")) == 1
