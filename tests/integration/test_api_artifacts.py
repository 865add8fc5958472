"""A job's debug artifacts through the HTTP API (issue 45), on the real server of
test_api_projects: listed and downloaded by a member of the job's project and an admin;
another project's user gets word for word the 404 of a job that does not exist."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from farm_core import artifacts, jobs
from farm_core.artifacts import NewArtifact
from farm_core.schema import FAILED, Job
from tests.integration import test_api_projects as projects_api
from tests.support.farm import add_device, write_model

pytestmark = pytest.mark.integration

server, _call = projects_api.server, projects_api._call  # the server with USERS' tokens
LOGCAT = b"01-02 12:34:56.789  4242  4242 F libc    : Fatal signal 11 (SIGSEGV)\n"


@pytest.fixture
def job(server, farm, tmp_path: Path) -> int:
    """A failed job of project vision with a stored logcat and its result's tool output."""
    add_device(farm.engine, "noop:idle")
    farm.submit([write_model(tmp_path / "v.tflite", 3.0)], "key=noop:idle", project="vision",
                owner="vera")  # fmt: skip
    with farm.engine.begin() as c:
        job_id = c.execute(select(Job.id)).scalar_one()
        artifacts.save(c, job_id, 1, [NewArtifact("logcat", "logcat.txt", LOGCAT, keep="tail")])
        jobs.claim(c, job_id, 1, "w", 60)
        jobs.finish(c, job_id, 1, "w", FAILED, {"error": "ToolOutputError", "log": "Segfault\n"})
    return job_id


def _list(server, job: int, who: str | None):
    return _call(server, "GET", f"/v1/jobs/{job}/artifacts", who)


@pytest.mark.parametrize("who", ["vera", "rob", "root"])
def test_the_projects_members_and_an_admin_list_a_jobs_artifacts(server, job, who) -> None:
    reply = _list(server, job, who)
    assert reply.status == 200, reply.body
    rows = {r["name"]: r for r in reply.json()["artifacts"]}
    assert set(rows) == {"logcat.txt", "tool_output.txt"}
    assert rows["logcat.txt"]["url"] == f"/v1/jobs/{job}/artifacts/1/logcat.txt"
    assert rows["logcat.txt"]["size_bytes"] == len(LOGCAT) and not rows["logcat.txt"]["truncated"]


def test_a_member_downloads_the_stored_bytes(server, job) -> None:
    reply = _call(server, "GET", f"/v1/jobs/{job}/artifacts/1/logcat.txt", "vera")
    assert reply.status == 200 and reply.body == LOGCAT
    assert reply.headers["content-type"].startswith("text/plain")
    assert f'filename="job{job}-1-logcat.txt"' in reply.headers["content-disposition"]


def test_the_tool_output_downloads_from_the_result(server, job) -> None:
    reply = _call(server, "GET", f"/v1/jobs/{job}/artifacts/1/tool_output.txt", "rob")
    assert reply.status == 200 and reply.body == b"Segfault\n"


@pytest.mark.parametrize("path", ["/v1/jobs/{j}/artifacts", "/v1/jobs/{j}/artifacts/1/logcat.txt"])
def test_another_projects_user_gets_the_404_of_a_missing_job(server, job, path: str) -> None:
    theirs = _call(server, "GET", path.format(j=job), "ana")
    missing = _call(server, "GET", path.format(j=job + 999), "ana")
    assert theirs.status == missing.status == 404
    said = theirs.json()["error"]["message"].replace(str(job), "N")
    assert said == missing.json()["error"]["message"].replace(str(job + 999), "N")


def test_an_artifact_the_job_does_not_have_is_404(server, job) -> None:
    reply = _call(server, "GET", f"/v1/jobs/{job}/artifacts/2/logcat.txt", "vera")
    assert reply.status == 404 and "no artifact 2/logcat.txt" in reply.json()["error"]["message"]


def test_without_a_token_it_is_401(server, job) -> None:
    assert _list(server, job, None).status == 401
