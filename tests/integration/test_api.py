"""The HTTP API (`devicefarm api`, a real uvicorn server) on PostgreSQL and Redis, with
agents on no-op devices: submission, results, auth and roles, the checks any public
endpoint needs (upload cap, content type, file names), and the CLI talking to it
(`--api URL`), whose output and exit codes must be the local commands' own."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require_module
from tests.integration.conftest import FAST_TIMING, REPO
from tests.support.farm import converter_named_model, free_port, kill_group, wait_until, write_model

require_module("uvicorn", "uvicorn (the api extra)")
require_module("python_multipart", "python-multipart (the api extra)")

pytestmark = pytest.mark.integration

#: The server's caps in the tests: a model (the tiny test models are < 1 KiB) and a body.
MODEL_CAP_MB = 0.05
UPLOAD_CAP_MB = 0.1
SERVER_READY_S = 30.0


@dataclass
class ApiServer:
    url: str
    tokens: dict[str, str]  #: role -> that user's token
    tokens_file: Path
    proc: subprocess.Popen
    log: Path


@dataclass
class Reply:
    status: int
    headers: Any
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None):
    """`devicefarm ARGS...` as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "devicefarm.cli", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)) | (env or {}),
        cwd=cwd,
        timeout=180,
    )


@pytest.fixture(scope="module")
def api_server(pg_session_url: str, redis_server, tmp_path_factory) -> Iterator[ApiServer]:
    """`devicefarm api` on a free port, with an admin, a submit and a read user made by
    `devicefarm api token add`."""
    folder = tmp_path_factory.mktemp("api")
    migrated = cli("db", "upgrade", "--db", pg_session_url)  # the deploy's own first step
    assert migrated.returncode == 0, migrated.stderr
    tokens_file = folder / "tokens.json"
    tokens = {}
    for role in ("admin", "submit", "read"):
        made = cli(
            "api", "token", "add", f"{role}-user", "--role", role, "--tokens", str(tokens_file)
        )
        assert made.returncode == 0, made.stderr
        tokens[role] = made.stdout.strip()
    port = free_port()
    log = folder / "api.log"
    env = dict(os.environ, PYTHONPATH=str(REPO), DEVICEFARM_HOME=str(folder)) | FAST_TIMING
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "devicefarm.cli",
            "api",
            "--port",
            str(port),
            "--db",
            pg_session_url,
            "--broker",
            redis_server.url,
            "--tokens",
            str(tokens_file),
            "--max-model-mb",
            str(MODEL_CAP_MB),
            "--max-upload-mb",
            str(UPLOAD_CAP_MB),
        ],
        cwd=folder,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    server = ApiServer(f"http://127.0.0.1:{port}", tokens, tokens_file, proc, log)

    def up() -> bool:
        if proc.poll() is not None:
            pytest.fail(f"devicefarm api exited:\n{log.read_text()[-3000:]}")
        try:
            return call(server, "GET", "/v1/health").status == 200
        except OSError:
            return False

    wait_until(up, SERVER_READY_S, "devicefarm api to answer")
    yield server
    kill_group(proc)


@pytest.fixture
def api(api_server: ApiServer, farm) -> ApiServer:
    """The server, on this test's emptied database and broker (`farm`)."""
    return api_server


def call(
    server: ApiServer,
    method: str,
    path: str,
    role: str | None = "admin",
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    token: str | None = None,
) -> Reply:
    headers = dict(headers or {})
    token = token or (server.tokens[role] if role else None)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(server.url + path, body, headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return Reply(r.status, r.headers, r.read())
    except urllib.error.HTTPError as exc:
        return Reply(exc.code, exc.headers, exc.read())


def multipart(files: list[tuple[str, bytes]], **fields: Any) -> tuple[bytes, dict[str, str]]:
    boundary = uuid.uuid4().hex
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
        for k, v in fields.items()
    ]
    for name, data in files:
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="model"; filename="{name}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        )
        parts.append(head.encode() + data + b"\r\n")
    body = b"".join(parts) + f"--{boundary}--\r\n".encode()
    return body, {"Content-Type": f"multipart/form-data; boundary={boundary}"}


def model_bytes(tmp_path: Path, scale: float = 1.0) -> bytes:
    return write_model(tmp_path / f"m{scale}.tflite", scale).read_bytes()


def wait_campaign(server: ApiServer, campaign: int, timeout_s: float = 90.0) -> dict:
    from farm_core.schema import TERMINAL_STATES

    def done() -> dict | None:
        body = call(server, "GET", f"/v1/campaigns/{campaign}", "read").json()
        return body if all(r["state"] in TERMINAL_STATES for r in body["rows"]) else None

    return wait_until(done, timeout_s, f"campaign {campaign} to end", 0.5)


# --- the schema ------------------------------------------------------------------------


def test_every_route_is_in_the_openapi_schema_with_its_methods() -> None:
    from api.app import ROUTES
    from api.openapi import OPENAPI

    served = {}
    for route in ROUTES:
        path = re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path)
        served.setdefault(path, set()).update(m.lower() for m in route.methods - {"HEAD"})
    documented = {path: set(ops) for path, ops in OPENAPI["paths"].items()}
    assert served == documented


def test_the_server_serves_its_schema_without_a_token(api: ApiServer) -> None:
    from api.openapi import OPENAPI

    reply = call(api, "GET", "/openapi.json", role=None)
    assert reply.status == 200 and reply.json() == OPENAPI


# --- submit, wait, results ---------------------------------------------------------------


def test_a_model_submitted_through_the_api_runs_on_agents_and_gives_results(
    api: ApiServer, farm, start_agent, tmp_path: Path
) -> None:
    start_agent("A", ["noop:a1", "noop:a2"], farm.db_url, farm.broker_url)
    body, headers = multipart(
        [("net.tflite", model_bytes(tmp_path))], devices="kind=noop", configs="cpu", runs="3"
    )
    reply = call(api, "POST", "/v1/campaigns", "submit", body, headers)
    assert reply.status == 201, reply.body
    sub = reply.json()
    assert sub["jobs"] == 2 and sub["sent"] == 2 and sub["devices"] == ["noop:a1", "noop:a2"]
    status = wait_campaign(api, sub["campaign"])
    assert status["states"] == {"succeeded": 2}
    results = call(api, "GET", f"/v1/campaigns/{sub['campaign']}/results", "read").json()
    rows = results["results"]
    assert [(r["model"], r["device"], r["state"]) for r in rows] == [
        ("net.tflite", "noop:a1", "succeeded"),
        ("net.tflite", "noop:a2", "succeeded"),
    ]
    # the noop runner reports 1 us per run: the figure stored is the figure served
    assert all(r["avg_ms"] == pytest.approx(0.001) for r in rows)
    stored = farm.results(sub["campaign"])
    assert sorted(r.device_key for r in stored) == ["noop:a1", "noop:a2"]


def test_a_raw_body_submission_takes_its_name_from_the_query(
    api: ApiServer, farm, tmp_path: Path
) -> None:
    from tests.support.farm import add_device

    add_device(farm.engine, "noop:x")
    reply = call(
        api,
        "POST",
        "/v1/campaigns?filename=raw.tflite&devices=key%3Dnoop:x&configs=cpu",
        "submit",
        model_bytes(tmp_path),
        {"Content-Type": "application/octet-stream"},
    )
    assert reply.status == 201, reply.body
    [job] = farm.jobs(reply.json()["campaign"])
    assert job.model_name == "raw.tflite" and job.device_key == "noop:x"


def test_results_come_as_csv_with_the_local_commands_columns(
    api: ApiServer, farm, tmp_path: Path
) -> None:
    from tests.support.farm import add_device

    add_device(farm.engine, "noop:x")
    sub = farm.submit([write_model(tmp_path / "c.tflite")], "key=noop:x")
    reply = call(api, "GET", f"/v1/campaigns/{sub.campaign_id}/results?format=csv", "read")
    assert reply.status == 200
    assert reply.headers["Content-Type"].startswith("text/csv")
    local = cli("results", str(sub.campaign_id), "--format", "csv", "--db", farm.db_url)
    assert reply.body.decode() + "\n" == local.stdout


def test_a_submission_the_farm_refuses_is_400_with_every_problem(
    api: ApiServer, tmp_path: Path
) -> None:
    body, headers = multipart([("m.tflite", b"not a model at all")], devices="kind=none", runs="0")
    reply = call(api, "POST", "/v1/campaigns", "submit", body, headers)
    assert reply.status == 400
    errors = reply.json()["error"]["errors"]
    assert any(e.startswith("model m.tflite:") for e in errors)  # named as sent, no temp path
    assert any("--runs" in e for e in errors)
    assert any("matches no device" in e for e in errors)


def test_a_parameter_of_the_wrong_type_is_400(api: ApiServer, tmp_path: Path) -> None:
    body, headers = multipart([("m.tflite", model_bytes(tmp_path))], priority="high")
    reply = call(api, "POST", "/v1/campaigns", "submit", body, headers)
    assert reply.status == 400
    assert "priority: not a whole number" in reply.json()["error"]["message"]


# --- auth and roles -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/campaigns"),
        ("GET", "/v1/devices"),
        ("POST", "/v1/campaigns"),
        ("GET", "/v1/allowlist?model=x"),
        ("POST", "/v1/campaigns/1/cancel"),
    ],
)
def test_no_token_is_401_with_a_bearer_challenge(api: ApiServer, method: str, path: str) -> None:
    reply = call(api, method, path, role=None)
    assert reply.status == 401
    assert reply.headers["WWW-Authenticate"].startswith("Bearer")
    assert reply.json()["error"]["status"] == 401


def test_an_unknown_token_is_401(api: ApiServer) -> None:
    reply = call(api, "GET", "/v1/campaigns", token=api.tokens["admin"] + "x")
    assert reply.status == 401


@pytest.mark.parametrize(
    "path", ["/v1/campaigns", "/v1/campaigns/1/cancel", "/v1/campaigns/1/rerun"]
)
def test_the_read_role_gets_403_on_every_change(api: ApiServer, path: str, tmp_path: Path) -> None:
    body, headers = multipart([("m.tflite", model_bytes(tmp_path))])
    reply = call(api, "POST", path, "read", body, headers)
    assert reply.status == 403
    assert "read role" in reply.json()["error"]["message"]


def test_the_read_role_may_read(api: ApiServer) -> None:
    assert call(api, "GET", "/v1/campaigns", "read").json() == {"campaigns": []}
    assert call(api, "GET", "/v1/devices", "read").json() == {"devices": []}


def test_a_token_added_while_the_server_runs_works_at_once(api: ApiServer) -> None:
    made = cli(
        "api", "token", "add", "late-user", "--role", "read", "--tokens", str(api.tokens_file)
    )
    assert made.returncode == 0, made.stderr
    assert call(api, "GET", "/v1/campaigns", token=made.stdout.strip()).status == 200


def test_a_removed_user_token_stops_working(api: ApiServer) -> None:
    made = cli(
        "api", "token", "add", "gone-user", "--role", "read", "--tokens", str(api.tokens_file)
    )
    token = made.stdout.strip()
    assert call(api, "GET", "/v1/campaigns", token=token).status == 200
    removed = cli("api", "token", "remove", "gone-user", "--tokens", str(api.tokens_file))
    assert removed.returncode == 0, removed.stderr
    assert call(api, "GET", "/v1/campaigns", token=token).status == 401


# --- upload cap, content type, names ------------------------------------------------------


def test_a_declared_length_over_the_cap_is_413_before_any_body_is_sent(api: ApiServer) -> None:
    """Only the headers go out: the server must answer from Content-Length alone."""
    host, port = urllib.parse.urlsplit(api.url).netloc.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.putrequest("POST", "/v1/campaigns?filename=big.tflite")
    conn.putheader("Authorization", f"Bearer {api.tokens['submit']}")
    conn.putheader("Content-Type", "application/octet-stream")
    conn.putheader("Content-Length", str(10 * 1024**3))
    conn.endheaders()
    reply = conn.getresponse()
    assert reply.status == 413
    assert "upload cap" in json.loads(reply.read())["error"]["message"]
    conn.close()


def test_a_chunked_body_over_the_cap_is_413(api: ApiServer) -> None:
    chunk = b"\0" * 64 * 1024
    over = int(UPLOAD_CAP_MB * 1024**2) // len(chunk) + 2
    host, port = urllib.parse.urlsplit(api.url).netloc.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    headers = {
        "Authorization": f"Bearer {api.tokens['submit']}",
        "Content-Type": "application/octet-stream",
    }
    # the server may answer and close while the rest is still being sent
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        conn.request(
            "POST",
            "/v1/campaigns?filename=big.tflite",
            body=iter([chunk] * over),
            headers=headers,
            encode_chunked=True,
        )
    reply = conn.getresponse()
    assert reply.status == 413
    conn.close()


def test_a_model_over_the_model_cap_is_413(api: ApiServer) -> None:
    body, headers = multipart([("big.tflite", b"\0" * int(MODEL_CAP_MB * 1024**2 + 1))])
    reply = call(api, "POST", "/v1/campaigns", "submit", body, headers)
    assert reply.status == 413
    assert "big.tflite" in reply.json()["error"]["message"]


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/json", "application/x-www-form-urlencoded", ""]
)
def test_a_submission_of_the_wrong_content_type_is_415(
    api: ApiServer, content_type: str, tmp_path: Path
) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    reply = call(api, "POST", "/v1/campaigns", "submit", model_bytes(tmp_path), headers)
    assert reply.status == 415


def test_a_body_on_cancel_that_is_not_json_is_415(api: ApiServer) -> None:
    reply = call(
        api, "POST", "/v1/campaigns/1/cancel", "submit", b"x", {"Content-Type": "text/plain"}
    )
    assert reply.status == 415


@pytest.mark.parametrize(
    "name",
    [
        "../escape.tflite",
        "../../etc/passwd",
        "/etc/passwd",
        "dir/m.tflite",
        "..\\escape.tflite",
        "..",
        ".hidden.tflite",
        "m\x1b[31m.tflite",
    ],
)
def test_a_model_name_with_a_path_is_refused_in_a_multipart_upload(
    api: ApiServer, name: str, tmp_path: Path
) -> None:
    body, headers = multipart([(name, model_bytes(tmp_path))])
    reply = call(api, "POST", "/v1/campaigns", "submit", body, headers)
    assert reply.status == 400
    assert "file name" in reply.json()["error"]["message"]


@pytest.mark.parametrize(
    "name", ["../escape.tflite", "/tmp/x.tflite", "a%2Fb.tflite", "C:%5Cm.tflite", "m%00.tflite"]
)
def test_a_model_name_with_a_path_is_refused_in_a_raw_upload(
    api: ApiServer, name: str, tmp_path: Path
) -> None:
    reply = call(
        api,
        "POST",
        f"/v1/campaigns?filename={name}",
        "submit",
        model_bytes(tmp_path),
        {"Content-Type": "application/octet-stream"},
    )
    assert reply.status == 400
    assert "file name" in reply.json()["error"]["message"]


def test_an_unknown_campaign_is_404(api: ApiServer) -> None:
    for method, path in [
        ("GET", "/v1/campaigns/999"),
        ("GET", "/v1/campaigns/999/results"),
        ("POST", "/v1/campaigns/999/cancel"),
        ("POST", "/v1/campaigns/999/rerun"),
    ]:
        assert call(api, method, path).status == 404, path


def test_an_unknown_route_is_a_json_404(api: ApiServer) -> None:
    reply = call(api, "GET", "/v1/nothing")
    assert reply.status == 404 and reply.json()["error"]["status"] == 404


# --- devices and allowlists --------------------------------------------------------------


def test_devices_are_listed_with_their_liveness(api: ApiServer, farm) -> None:
    from tests.support.farm import add_device

    add_device(farm.engine, "noop:x", host="lab1")
    [device] = call(api, "GET", "/v1/devices", "read").json()["devices"]
    assert (device["key"], device["host"], device["alive"]) == ("noop:x", "lab1", "online")


def test_an_allowlist_downloads_as_the_local_export_writes_it(
    api: ApiServer, farm, start_agent, tmp_path: Path
) -> None:
    start_agent("A", ["noop:a1"], farm.db_url, farm.broker_url)
    sub = farm.submit([write_model(tmp_path / "al.tflite")], "kind=noop", "cpu,gpu-fp32")
    farm.wait_done(sub.campaign_id)
    [sha] = {j.model_sha256 for j in farm.jobs(sub.campaign_id)}
    reply = call(api, "GET", f"/v1/allowlist?model={sha}&format=csv", "read")
    assert reply.status == 200
    assert (
        reply.headers["Content-Disposition"] == f'attachment; filename="allowlist-{sha[:12]}.csv"'
    )
    local = cli("allowlist", "--model", sha, "--format", "csv", "--out", "-", "--db", farm.db_url)
    assert local.returncode == 0, local.stderr
    assert reply.body.decode() == local.stdout


def test_an_allowlist_of_an_unknown_model_is_404(api: ApiServer) -> None:
    reply = call(api, "GET", "/v1/allowlist?model=" + "ab" * 32, "read")
    assert reply.status == 404


def test_the_cli_exports_an_allowlist_through_the_api_as_it_does_locally(
    api: ApiServer, farm, tmp_path: Path
) -> None:
    from tests.support.farm import add_device

    add_device(farm.engine, "noop:x")
    model = write_model(tmp_path / "exp.tflite")
    farm.submit([model], "key=noop:x")
    env = {"DEVICEFARM_API_TOKEN": api.tokens["read"]}
    args = ("allowlist", "--model", str(model), "--format", "json", "--out", "-")
    remote = cli(*args, "--api", api.url, env=env)
    local = cli(*args, "--db", farm.db_url)
    assert local.returncode == 0, local.stderr
    assert (remote.returncode, remote.stdout, remote.stderr) == (0, local.stdout, local.stderr)


def test_a_delegates_allowlist_exports_through_the_api_as_it_does_locally(
    api: ApiServer, farm, tmp_path: Path
) -> None:
    from tests.support.farm import add_device

    add_device(farm.engine, "noop:x")
    model = write_model(tmp_path / "nn.tflite")
    farm.submit([model], "key=noop:x", "cpu,nnapi")
    env = {"DEVICEFARM_API_TOKEN": api.tokens["read"]}
    args = ("allowlist", "--model", str(model), "--delegate", "nnapi", "--format", "json")
    remote = cli(*args, "--out", "-", "--api", api.url, env=env)
    local = cli(*args, "--out", "-", "--db", farm.db_url)
    assert local.returncode == 0, local.stderr
    assert '"delegate": "nnapi"' in local.stdout
    assert (remote.returncode, remote.stdout, remote.stderr) == (0, local.stdout, local.stderr)
    for query, words in (
        ("delegate=npu", "delegate: one of gpu, xnnpack, nnapi, hexagon"),
        ("delegate=nnapi&format=devicedb-bin", "devicedb-bin is LiteRT's GPU"),
    ):
        reply = call(api, "GET", f"/v1/allowlist?model=nn.tflite&{query}", "read")
        assert reply.status == 400 and words in reply.body.decode(), reply.body


# --- the CLI with --api ------------------------------------------------------------------


def test_the_cli_submits_waits_and_judges_through_the_api(
    api: ApiServer, farm, start_agent, tmp_path: Path
) -> None:
    start_agent("A", ["noop:a1", "noop:a2"], farm.db_url, farm.broker_url)
    model = write_model(tmp_path / "ci.tflite")
    junit = tmp_path / "junit.xml"
    env = {"DEVICEFARM_API_TOKEN": api.tokens["submit"]}
    done = cli(
        "submit", str(model), "--api", api.url, "--devices", "kind=noop", "--configs", "cpu",
        "--runs", "3", "--wait", "--junit", str(junit), env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    campaign = int(re.search(r"campaign (\d+): 2 jobs on 2 device\(s\), 2 sent", done.stdout)[1])
    assert re.search(r"\[2/2\] noop:a\d cpu: succeeded", done.stdout)
    assert f"campaign {campaign}: passed (exit 0)" in done.stdout
    assert junit.read_text().count("<testcase") == 2
    # status, results and devices print what the local commands print
    for args in (["status"], ["status", str(campaign)], ["results", str(campaign)]):
        remote = cli(*args, "--api", api.url, env=env)
        local = cli(*args, "--db", farm.db_url)
        assert (remote.returncode, remote.stdout) == (local.returncode, local.stdout), args
    remote = cli(
        "results", str(campaign), "--format", "json", env=env | {"DEVICEFARM_API": api.url}
    )
    assert json.loads(remote.stdout) == json.loads(
        cli("results", str(campaign), "--format", "json", "--db", farm.db_url).stdout
    )
    # the same devices table, but for when each was last seen (heartbeats go on meanwhile)
    remote, local = cli("devices", "--api", api.url, env=env), cli("devices", "--db", farm.db_url)
    seen = re.compile(r"\d\d:\d\d:\d\d")
    assert remote.returncode == local.returncode == 0
    assert seen.sub("T", remote.stdout) == seen.sub("T", local.stdout)
    assert re.search(r"^noop:a1\s+online", remote.stdout, re.M)


def test_the_cli_sends_input_values_through_the_api(
    api: ApiServer, farm, start_agent, tmp_path: Path
) -> None:
    import numpy as np
    from sqlalchemy import select

    from farm_core.schema import Campaign, InputFile

    start_agent("A", ["noop:a1"], farm.db_url, farm.broker_url)
    model = converter_named_model(tmp_path / "conv.tflite")
    values = tmp_path / "x.bin"
    values.write_bytes(np.arange(4, dtype=np.float32).tobytes())
    env = {"DEVICEFARM_API": api.url, "DEVICEFARM_API_TOKEN": api.tokens["submit"]}
    done = cli(
        "submit", str(model), "--devices", "kind=noop", "--configs", "cpu", "--runs", "2",
        "--input", f"serving_default_input_1:0:1,4:{values}", "--wait", env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    campaign = int(re.search(r"campaign (\d+):", done.stdout)[1])
    with farm.engine.begin() as conn:
        settings = conn.execute(select(Campaign.settings).where(Campaign.id == campaign)).scalar()
        [item] = settings["inputs"]
        stored = conn.execute(select(InputFile.data).where(InputFile.sha256 == item["sha256"]))
        assert stored.scalar() == values.read_bytes()
    assert (item["layer"], item["shape"], item["dtype"]) == (
        "serving_default_input_1:0",
        [1, 4],
        "float32",
    )
    # and what the farm refuses, it refuses through the API with the local command's words
    bad = cli(
        "submit", str(model), "--devices", "kind=noop", "--configs", "cpu",
        "--input", f"x:1,4:{values}", env=env,
    )  # fmt: skip
    local = cli(
        "submit", str(model), "--devices", "kind=noop", "--configs", "cpu",
        "--input", f"x:1,4:{values}", "--db", farm.db_url, "--broker", farm.broker_url,
    )  # fmt: skip
    assert bad.returncode == local.returncode == 1
    assert "input 'x' is not an input of the model" in bad.stderr, bad.stderr
    assert bad.stderr == local.stderr


def test_the_cli_wait_through_the_api_shows_running_jobs_and_names_each_model(
    api: ApiServer, farm, start_agent, tmp_path: Path
) -> None:
    start_agent("A", ["noop:slow?delay_s=4"], farm.db_url, farm.broker_url)
    first, second = write_model(tmp_path / "a.tflite", 1.0), write_model(tmp_path / "b.tflite", 2.0)
    env = {"DEVICEFARM_API": api.url, "DEVICEFARM_API_TOKEN": api.tokens["submit"]}
    done = cli(
        "submit", str(first), str(second), "--devices", "kind=noop", "--configs", "cpu",
        "--runs", "4", "--wait", env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    running = r"^  [ab]\.tflite noop:slow cpu: running, benchmark: [1-4]/4 runs, .* \(t\+"
    assert re.search(running, done.stdout, re.M), done.stdout
    ended = re.findall(r"^\[\d/2\] ([ab])\.tflite noop:slow cpu: succeeded", done.stdout, re.M)
    assert sorted(ended) == ["a", "b"], done.stdout
    campaign = int(re.search(r"campaign (\d+):", done.stdout)[1])
    listed = cli("status", env=env)
    assert re.search(rf"^campaign {campaign} .*gate: passed \(exit 0\)$", listed.stdout, re.M)


def test_the_cli_wait_through_the_api_writes_junit_when_it_gives_up(
    api: ApiServer, farm, tmp_path: Path
) -> None:
    import xml.etree.ElementTree as ET
    from datetime import timedelta

    from farm_core.schema import utcnow
    from tests.support.farm import add_device

    # registered, but no agent: its job never starts; seen "an hour ahead", so that it is
    # still online when the CLI submits (the tests' offline timeout is 3 s, and a busy
    # host once took longer than that to start the CLI)
    add_device(farm.engine, "noop:idle", last_seen=utcnow() + timedelta(hours=1))
    junit = tmp_path / "junit.xml"
    env = {"DEVICEFARM_API": api.url, "DEVICEFARM_API_TOKEN": api.tokens["submit"]}
    done = cli(
        "submit", str(write_model(tmp_path / "t.tflite")), "--devices", "key=noop:idle",
        "--configs", "cpu", "--wait", "--wait-timeout", "2", "--junit", str(junit), env=env,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "did not finish in 2 s; its jobs go on" in done.stdout, done.stdout + done.stderr
    [error] = ET.parse(junit).getroot().iter("error")
    assert error.get("type") == "unfinished"
    assert error.get("message").endswith("when the wait ended: --wait-timeout 2 s passed")


def test_the_cli_through_the_api_exits_1_on_a_failed_job_and_reruns_it(
    api: ApiServer, farm, start_agent, tmp_path: Path
) -> None:
    start_agent("B", ["noop:bad?error=model"], farm.db_url, farm.broker_url)
    env = {"DEVICEFARM_API": api.url, "DEVICEFARM_API_TOKEN": api.tokens["submit"]}
    done = cli(
        "submit", str(write_model(tmp_path / "f.tflite")), "--devices", "kind=noop",
        "--configs", "cpu", "--wait", env=env,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    campaign = int(re.search(r"campaign (\d+):", done.stdout)[1])
    assert "failed (exit 1)" in done.stdout
    assert cli("status", str(campaign), env=env).returncode == 1
    assert cli("results", str(campaign), "--format", "csv", env=env).returncode == 1
    rerun = cli("rerun", str(campaign), env=env)
    assert rerun.returncode == 0, rerun.stderr
    [job] = farm.jobs(campaign)
    assert f"re-queued job {job.id}: f.tflite noop:bad cpu (was failed)" in rerun.stdout
    assert job.attempt == 2


def test_the_cli_through_the_api_cancels_and_refuses_an_unknown_campaign(
    api: ApiServer, farm, tmp_path: Path
) -> None:
    from tests.support.farm import add_device

    add_device(farm.engine, "noop:idle")  # registered, but no agent: its job stays queued
    sub = farm.submit([write_model(tmp_path / "q.tflite")], "key=noop:idle")
    env = {"DEVICEFARM_API": api.url, "DEVICEFARM_API_TOKEN": api.tokens["submit"]}
    done = cli("cancel", str(sub.campaign_id), env=env)
    assert (done.returncode, done.stdout) == (
        0,
        f"campaign {sub.campaign_id}: 1 job(s) cancelled\n",
    )
    missing = cli("cancel", "999", env=env)
    local = cli("cancel", "999", "--db", farm.db_url)
    assert (missing.returncode, missing.stderr) == (1, local.stderr)


def test_the_cli_with_a_read_token_cannot_submit(api: ApiServer, tmp_path: Path) -> None:
    env = {"DEVICEFARM_API": api.url, "DEVICEFARM_API_TOKEN": api.tokens["read"]}
    done = cli("submit", str(write_model(tmp_path / "r.tflite")), env=env)
    assert done.returncode == 1
    assert "HTTP 403" in done.stderr and "read role" in done.stderr


def test_the_cli_without_a_token_is_told_so(api: ApiServer) -> None:
    done = cli("status", "--api", api.url, env={"DEVICEFARM_API_TOKEN": ""})
    assert done.returncode == 1 and "HTTP 401" in done.stderr
