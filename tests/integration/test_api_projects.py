"""Projects, ownership and scoped tokens in the HTTP API (issue 42), on a real server,
PostgreSQL and Redis: every campaign and model route refuses another project's user as if
the thing did not exist (404: ids do not leak), a read-only member changing it (403), and
lets a member and an admin through; lists show the caller's projects only; submission
records the project and the owner; expired, revoked and read-scoped tokens are refused.

Before projects, any `submit` user cancelled anyone's running campaign (200,
{"cancelled": 1}): every 404 and 403 case here failed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from tests.conftest import require_module
from tests.integration.conftest import FAST_TIMING, REPO
from tests.integration.test_api import Reply, call, cli, multipart
from tests.support.farm import add_device, free_port, kill_group, wait_until, write_model

require_module("uvicorn", "uvicorn (the api extra)")
require_module("python_multipart", "python-multipart (the api extra)")

pytestmark = pytest.mark.integration

#: user -> (--role, --project...) as `devicefarm api token add` takes them
USERS = {
    "vera": ("submit", ["vision"]),  # submits in vision
    "rob": ("read", ["vision"]),  # reads vision
    "ana": ("submit", ["audio"]),  # submits in audio
    "bo": ("submit", ["vision", "audio:read"]),  # two projects: must name one to submit
    "root": ("admin", []),
}


@dataclass
class Server:
    url: str
    tokens: dict[str, str]  #: user (or a special token's name) -> token
    tokens_file: Path
    log: Path


def _add(tokens_file: Path, name: str, *extra: str) -> str:
    made = cli("api", "token", "add", name, *extra, "--tokens", str(tokens_file))
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


@pytest.fixture(scope="module")
def server(pg_session_url: str, redis_server, tmp_path_factory) -> Iterator[Server]:
    """`devicefarm api` with the USERS, an admin's read-scoped token, an expired token and
    a revoked one, all made by `devicefarm api token` (the expired one by hand: the
    command refuses a past expiry)."""
    from farm_core.accounts import load_accounts, save_accounts, utcnow

    folder = tmp_path_factory.mktemp("api-projects")
    assert cli("db", "upgrade", "--db", pg_session_url).returncode == 0
    tokens_file = folder / "tokens.json"
    tokens = {}
    for name, (role, projects) in USERS.items():
        flags = [f for p in projects for f in ("--project", p)]
        tokens[name] = _add(tokens_file, name, "--role", role, *flags)
    tokens["root-read"] = _add(tokens_file, "root", "--scope", "read")
    tokens["revoked"] = _add(tokens_file, "vera", "--expires", "30d")
    rid = load_accounts(tokens_file).authenticate(tokens["revoked"]).token.id
    assert rid in cli("api", "token", "list", "--tokens", str(tokens_file)).stdout
    assert cli("api", "token", "revoke", rid, "--tokens", str(tokens_file)).returncode == 0
    then = utcnow() - timedelta(days=2)
    accounts, _, tokens["expired"] = load_accounts(tokens_file).add_token(
        "vera", expires=then + timedelta(days=1), now=then
    )
    save_accounts(accounts, tokens_file)

    port = free_port()
    log = folder / "api.log"
    env = dict(os.environ, PYTHONPATH=str(REPO), DEVICEFARM_HOME=str(folder)) | FAST_TIMING
    env["DEVICEFARM_API_LOG_REPEATS"] = "100000"  # every access line (floods: test_api_abuse)
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "devicefarm.cli", "api", "--port", str(port),
            "--db", pg_session_url, "--broker", redis_server.url, "--tokens", str(tokens_file),
        ],
        cwd=folder, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    srv = Server(f"http://127.0.0.1:{port}", tokens, tokens_file, log)

    def up() -> bool:
        if proc.poll() is not None:
            pytest.fail(f"devicefarm api exited:\n{log.read_text()[-3000:]}")
        try:
            return _call(srv, "GET", "/v1/health", None).status == 200
        except OSError:
            return False

    wait_until(up, 30.0, "devicefarm api to answer")
    yield srv
    kill_group(proc)


def _call(srv: Server, method: str, path: str, who: str | None, **kw) -> Reply:
    """`call` as user (or token name) `who`."""
    token = srv.tokens[who] if who else None
    return call(srv, method, path, role=None, token=token, **kw)  # type: ignore[arg-type]


@dataclass
class Lab:
    vision: int  #: a campaign of project vision (owner vera), its job queued
    audio: int  #: a campaign of project audio (owner ana)
    vision_sha: str  #: the model only vision ran


@pytest.fixture
def lab(server: Server, farm, tmp_path: Path) -> Lab:
    """Two projects' campaigns on an idle device (no agent: their jobs stay queued)."""
    add_device(farm.engine, "noop:idle")
    vision = farm.submit(
        [write_model(tmp_path / "v.tflite", 3.0)], "key=noop:idle", project="vision", owner="vera"
    )
    audio = farm.submit(
        [write_model(tmp_path / "a.tflite", 5.0)], "key=noop:idle", project="audio", owner="ana"
    )
    [job] = farm.jobs(vision.campaign_id)
    return Lab(vision.campaign_id, audio.campaign_id, job.model_sha256)


#: Every route that reads or changes one campaign or one model: (method, path, changes).
ROUTES = [
    ("GET", "/v1/campaigns/{c}", False),
    ("GET", "/v1/campaigns/{c}/results", False),
    ("GET", "/v1/campaigns/{c}/results?format=csv", False),
    ("GET", "/v1/campaigns/{c}/gate", False),
    ("POST", "/v1/campaigns/{c}/gate", True),
    ("POST", "/v1/campaigns/{c}/confirm", True),
    ("POST", "/v1/campaigns/{c}/cancel", True),
    ("POST", "/v1/campaigns/{c}/rerun", True),
    ("GET", "/v1/allowlist?model={sha}", False),
]
ROUTE_IDS = [f"{m} {p.split('?')[0]}{'?csv' if 'csv' in p else ''}" for m, p, _ in ROUTES]


def _path(path: str, lab: Lab, campaign: int | None = None) -> str:
    return path.format(c=lab.vision if campaign is None else campaign, sha=lab.vision_sha)


@pytest.mark.parametrize(("method", "path", "changes"), ROUTES, ids=ROUTE_IDS)
def test_another_projects_user_gets_the_404_of_a_missing_one(
    server: Server, lab: Lab, method: str, path: str, changes: bool
) -> None:
    theirs = _call(server, method, _path(path, lab), "ana")
    assert theirs.status == 404, theirs.body
    # word for word what a campaign (or model) that does not exist gets: no id leaks
    missing = _call(server, method, _path(path, lab, 999).replace(lab.vision_sha, "ab" * 32), "ana")
    assert missing.status == 404
    said = theirs.json()["error"]["message"].replace(lab.vision_sha, "S")
    assert said.replace(str(lab.vision), "N") == missing.json()["error"]["message"].replace(
        "ab" * 32, "S"
    ).replace("999", "N")


@pytest.mark.parametrize(("method", "path", "changes"), ROUTES, ids=ROUTE_IDS)
def test_a_member_of_the_project_succeeds(
    server: Server, lab: Lab, method: str, path: str, changes: bool
) -> None:
    reply = _call(server, method, _path(path, lab), "vera")
    assert reply.status == 200, reply.body


@pytest.mark.parametrize(("method", "path", "changes"), ROUTES, ids=ROUTE_IDS)
def test_an_admin_sees_and_changes_every_project(
    server: Server, lab: Lab, method: str, path: str, changes: bool
) -> None:
    reply = _call(server, method, _path(path, lab), "root")
    assert reply.status == 200, reply.body


@pytest.mark.parametrize(
    ("method", "path"), [(m, p) for m, p, changes in ROUTES if changes],
    ids=[i for i, (_, _, c) in zip(ROUTE_IDS, ROUTES, strict=True) if c],
)  # fmt: skip
def test_a_read_only_member_changing_gets_403(
    server: Server, lab: Lab, farm, method: str, path: str
) -> None:
    before = farm.jobs(lab.vision)
    reply = _call(server, method, _path(path, lab), "rob")
    assert reply.status == 403, reply.body
    assert "read role" in reply.json()["error"]["message"]
    assert farm.jobs(lab.vision) == before


@pytest.mark.parametrize(
    ("method", "path", "changes"), ROUTES[:-1], ids=ROUTE_IDS[:-1]
)  # the campaign routes
def test_a_member_with_a_read_role_in_one_project_cannot_change_it(
    server: Server, lab: Lab, method: str, path: str, changes: bool
) -> None:
    """bo submits in vision and reads audio: audio's campaign reads, and does not change."""
    reply = _call(server, method, _path(path, lab, lab.audio), "bo")
    assert reply.status == (403 if changes else 200), reply.body


def test_the_cancel_of_another_projects_running_campaign_is_refused(
    server: Server, lab: Lab, farm
) -> None:
    """The issue's own case: a submit user cancelling another's campaign got 200 and
    {"cancelled": 1}."""
    reply = _call(server, "POST", f"/v1/campaigns/{lab.vision}/cancel", "ana")
    assert reply.status == 404
    assert all(j.state != "cancelled" for j in farm.jobs(lab.vision))
    mine = _call(server, "POST", f"/v1/campaigns/{lab.vision}/cancel", "vera")
    assert (mine.status, mine.json()["cancelled"]) == (200, 1)


def test_a_gate_against_another_projects_baseline_is_404(server: Server, lab: Lab) -> None:
    reply = _call(server, "GET", f"/v1/campaigns/{lab.vision}/gate?baseline={lab.audio}", "vera")
    assert reply.status == 404
    admin = _call(server, "GET", f"/v1/campaigns/{lab.vision}/gate?baseline={lab.audio}", "root")
    assert admin.status == 200


@pytest.mark.parametrize(
    ("who", "seen"),
    [("vera", {"vision"}), ("rob", {"vision"}), ("ana", {"audio"}), ("bo", {"vision", "audio"}),
     ("root", {"vision", "audio"}), ("root-read", {"vision", "audio"})],
)  # fmt: skip
def test_the_campaign_list_shows_the_callers_projects_only(
    server: Server, lab: Lab, who: str, seen: set[str]
) -> None:
    rows = _call(server, "GET", "/v1/campaigns", who).json()["campaigns"]
    assert {r["project"] for r in rows} == seen
    by_project = {r["project"]: r for r in rows}
    if "vision" in seen:
        assert (by_project["vision"]["campaign"], by_project["vision"]["owner"]) == (
            lab.vision,
            "vera",
        )


# --- submission ------------------------------------------------------------------------


def _submit(server: Server, who: str, tmp_path: Path, **fields: str) -> Reply:
    body, headers = multipart(
        [("s.tflite", write_model(tmp_path / "s.tflite").read_bytes())],
        devices="key=noop:idle",
        configs="cpu",
        **fields,
    )
    return _call(server, "POST", "/v1/campaigns", who, body=body, headers=headers)


def _stored(farm, campaign: int) -> tuple[str, str, set[str]]:
    from sqlalchemy import select

    from farm_core.schema import Campaign

    with farm.engine.begin() as conn:
        project, owner = conn.execute(
            select(Campaign.project, Campaign.owner).where(Campaign.id == campaign)
        ).one()
    return project, owner, {j.project for j in farm.jobs(campaign)}


def test_a_submission_records_its_project_and_owner(
    server: Server, lab: Lab, farm, tmp_path: Path
) -> None:
    reply = _submit(server, "vera", tmp_path)  # vera's only project: vision
    assert reply.status == 201, reply.body
    assert reply.json()["project"] == "vision"
    assert _stored(farm, reply.json()["campaign"]) == ("vision", "vera", {"vision"})
    named = _submit(server, "bo", tmp_path, project="vision")
    assert named.status == 201, named.body
    assert _stored(farm, named.json()["campaign"]) == ("vision", "bo", {"vision"})


@pytest.mark.parametrize(
    ("who", "fields", "status", "words"),
    [
        ("ana", {"project": "vision"}, 403, "no role in project 'vision'"),
        ("bo", {"project": "audio"}, 403, "read role in project 'audio'"),
        ("bo", {}, 400, "project: give one of audio, vision"),
        ("rob", {}, 403, "read role"),
        ("root-read", {"project": "vision"}, 403, "read scope"),
    ],
    ids=["not-a-member", "read-member", "two-projects-unnamed", "read-user", "admin-read-scope"],
)
def test_a_submission_to_a_project_the_caller_may_not_submit_to_is_refused(
    server: Server, lab: Lab, farm, tmp_path: Path, who: str, fields: dict, status: int, words: str
) -> None:
    reply = _submit(server, who, tmp_path, **fields)
    assert reply.status == status, reply.body
    assert words in reply.json()["error"]["message"]
    assert len(_call(server, "GET", "/v1/campaigns", "root").json()["campaigns"]) == 2


def test_an_admin_submits_to_any_project(server: Server, lab: Lab, farm, tmp_path: Path) -> None:
    reply = _submit(server, "root", tmp_path, project="audio")
    assert reply.status == 201, reply.body
    assert _stored(farm, reply.json()["campaign"]) == ("audio", "root", {"audio"})


# --- tokens --------------------------------------------------------------------------------


@pytest.mark.parametrize(("token", "words"), [("expired", "expired at"), ("revoked", "revoked")])
def test_an_expired_or_revoked_token_is_401(
    server: Server, lab: Lab, token: str, words: str
) -> None:
    reply = _call(server, "GET", "/v1/campaigns", token)
    assert reply.status == 401
    assert reply.headers["WWW-Authenticate"].startswith("Bearer")
    assert words in reply.json()["error"]["message"]
    assert _call(server, "GET", "/v1/campaigns", "vera").status == 200  # vera's other token


@pytest.mark.parametrize(
    "path", ["/v1/campaigns/{c}/cancel", "/v1/campaigns/{c}/rerun", "/v1/campaigns/{c}/gate"]
)
def test_a_read_scoped_token_of_an_admin_reads_everything_and_changes_nothing(
    server: Server, lab: Lab, path: str
) -> None:
    assert _call(server, "GET", f"/v1/campaigns/{lab.vision}", "root-read").status == 200
    reply = _call(server, "POST", _path(path, lab), "root-read")
    assert reply.status == 403
    assert "read scope" in reply.json()["error"]["message"]


def test_a_model_is_seen_by_the_projects_that_ran_it(server: Server, lab: Lab) -> None:
    """bo reads audio and submits in vision: vision's model is his; ana's is not."""
    path = f"/v1/allowlist?model={lab.vision_sha[:12]}"
    assert _call(server, "GET", path, "bo").status == 200
    assert _call(server, "GET", path, "ana").status == 404


def test_each_authenticated_request_is_logged_with_user_token_and_project(
    server: Server, lab: Lab
) -> None:
    from farm_core.accounts import load_accounts

    token_id = load_accounts(server.tokens_file).authenticate(server.tokens["vera"]).token.id
    assert _call(server, "GET", f"/v1/campaigns/{lab.vision}", "vera").status == 200
    line = rf"user=vera token={token_id} project=vision GET /v1/campaigns/{lab.vision}$"
    wait_until(lambda: re.search(line, server.log.read_text(), re.M), 5.0, "the access line")
