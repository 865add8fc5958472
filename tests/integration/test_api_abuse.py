"""Hostile clients against `devicefarm api` (a real uvicorn server on PostgreSQL and Redis)
and the dashboard's login (issue 42): connections that never finish their headers, one
address with too many connections, a request flood from one address or with one token, the
log such floods write, and wrong passwords from many addresses.

The clients come from addresses of their own in 127.0.0.0/8 (Linux answers the whole block
on loopback), so that the server tells them apart as it tells real hosts apart."""

from __future__ import annotations

import http.client
import json
import os
import re
import select
import socket
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import require_module
from tests.integration.conftest import FAST_TIMING, REPO
from tests.support.farm import free_port, kill_group, wait_until

require_module("uvicorn", "uvicorn (the api extra)")

pytestmark = pytest.mark.integration

#: The server's limits in these tests (small, so that a test reaches them quickly).
HEADER_TIMEOUT_S = 3.0
BODY_TIMEOUT_S, MIN_BODY_RATE = 2.0, 200
PER_CLIENT_CONNECTIONS = 64
RATE, BURST = 5, 20
LOG_WINDOW_S, LOG_REPEATS = 3.0, 5
#: Connections that never finish their headers (the issue's 20,100, scaled to a 2-core CI
#: host; bench/api_abuse.py measures more), spread over this many source addresses.
SLOW_CONNECTIONS, SLOW_SOURCES = 2000, 40
#: /v1/health must answer within this while they are held.
HEALTH_WITHIN_S = 1.0
SERVER_READY_S = 30.0


@dataclass
class Server:
    port: int
    log: Path
    proc: subprocess.Popen
    uploader: str  #: a token of a user with the submit role


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "devicefarm.cli", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)) | (env or {}),
        timeout=120,
    )


def request(
    port: int,
    path: str,
    source: str,
    *,
    method: str = "GET",
    token: str | None = None,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    conn: http.client.HTTPConnection | None = None,
) -> tuple[int, http.client.HTTPResponse, bytes, float]:
    """(status, response, body, seconds) of one request from `source` (on `conn` if given)."""
    start = time.perf_counter()
    c = conn or http.client.HTTPConnection(
        "127.0.0.1", port, timeout=10, source_address=(source, 0)
    )
    all_headers = dict(headers or {})
    if token:
        all_headers["Authorization"] = f"Bearer {token}"
    try:
        c.request(method, path, body=body, headers=all_headers)
        response = c.getresponse()
        data = response.read()
    finally:
        if conn is None:
            c.close()
    return response.status, response, data, time.perf_counter() - start


@pytest.fixture(scope="module")
def api(pg_session_url: str, redis_server, tmp_path_factory) -> Iterator[Server]:
    """`devicefarm api` with small limits, its output in a log file."""
    folder = tmp_path_factory.mktemp("api-abuse")
    migrated = cli("db", "upgrade", "--db", pg_session_url)
    assert migrated.returncode == 0, migrated.stderr
    tokens = folder / "tokens.json"
    made = cli("api", "token", "add", "reader", "--role", "read", "--tokens", str(tokens))
    assert made.returncode == 0, made.stderr
    made = cli("api", "token", "add", "uploader", "--role", "submit", "--tokens", str(tokens))
    assert made.returncode == 0, made.stderr
    uploader = made.stdout.strip()
    port, log = free_port(), folder / "api.log"
    limits = {
        "--header-timeout-s": HEADER_TIMEOUT_S,
        "--body-timeout-s": BODY_TIMEOUT_S,
        "--min-body-rate": MIN_BODY_RATE,
        "--max-connections-per-client": PER_CLIENT_CONNECTIONS,
        "--rate-per-client": RATE,
        "--burst-per-client": BURST,
        "--rate-per-token": RATE,
        "--burst-per-token": BURST,
        "--log-window-s": LOG_WINDOW_S,
        "--log-repeats": LOG_REPEATS,
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "devicefarm.cli", "api", "--port", str(port)]
        + ["--db", pg_session_url, "--broker", redis_server.url, "--tokens", str(tokens)]
        + [str(x) for item in limits.items() for x in item],
        cwd=folder,
        env=dict(os.environ, PYTHONPATH=str(REPO), DEVICEFARM_HOME=str(folder)) | FAST_TIMING,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    server = Server(port, log, proc, uploader)

    def up() -> bool:
        if proc.poll() is not None:
            pytest.fail(f"devicefarm api exited:\n{log.read_text()[-3000:]}")
        try:
            return request(port, "/v1/health", "127.0.0.1")[0] == 200
        except OSError:
            return False

    wait_until(up, SERVER_READY_S, "devicefarm api to answer")
    yield server
    kill_group(proc)


def open_slow(
    port: int, source: str, first: bytes = b"GET /v1/health HTTP/1.1\r\n"
) -> socket.socket:
    """A connection that starts a request and never finishes its headers."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    if first:
        s.sendall(first + b"Host: test\r\n")
    return s


def answer_or_close(s: socket.socket, within_s: float) -> bytes | None:
    """What the server sent before it closed the connection (b"" for a bare close), or None
    when it still holds it after `within_s`."""
    s.settimeout(max(within_s, 0.01))
    got = b""
    try:
        while chunk := s.recv(4096):
            got += chunk
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass
    return got


def test_connections_that_never_finish_their_headers_are_dropped(api: Server) -> None:
    """Issue 42: 20,100 such connections were held for ever and /v1/health timed out."""
    started = time.monotonic()
    slow = [open_slow(api.port, f"127.0.1.{1 + i % SLOW_SOURCES}") for i in range(SLOW_CONNECTIONS)]
    try:
        times = []
        for _ in range(5):
            status, _, _, seconds = request(api.port, "/v1/health", "127.0.0.1")
            assert status == 200
            times.append(seconds)
        assert max(times) < HEALTH_WITHIN_S, times
        deadline = started + HEADER_TIMEOUT_S + 15
        answers = [answer_or_close(s, deadline - time.monotonic()) for s in slow]
        held = sum(a is None for a in answers)
        assert held == 0, f"{held} of {SLOW_CONNECTIONS} still held {HEADER_TIMEOUT_S + 15:g} s on"
        timed_out = sum(a.startswith(b"HTTP/1.1 408 ") for a in answers if a)
        assert timed_out > SLOW_CONNECTIONS * 0.9, timed_out
    finally:
        for s in slow:
            s.close()


def test_a_trickle_of_header_lines_does_not_extend_the_deadline(api: Server) -> None:
    s = open_slow(api.port, "127.0.1.200")
    try:
        started = time.monotonic()
        with pytest.raises(OSError):  # the server closes it while we still write
            while time.monotonic() - started < HEADER_TIMEOUT_S + 10:
                s.sendall(b"X-Slow: 1\r\n")
                time.sleep(0.3)
        assert time.monotonic() - started < HEADER_TIMEOUT_S + 5
    finally:
        s.close()


def test_a_keep_alive_connections_next_request_has_the_same_deadline(api: Server) -> None:
    conn = http.client.HTTPConnection(
        "127.0.0.1", api.port, timeout=10, source_address=("127.0.1.201", 0)
    )
    try:
        assert request(api.port, "/v1/health", "127.0.1.201", conn=conn)[0] == 200
        conn.sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: test\r\n")  # and no more
        started = time.monotonic()
        got = answer_or_close(conn.sock, HEADER_TIMEOUT_S + 10)
        assert got is not None and got.startswith(b"HTTP/1.1 408 "), got
        assert time.monotonic() - started < HEADER_TIMEOUT_S + 5
    finally:
        conn.close()


def start_upload(api: Server, source: str, length: int) -> socket.socket:
    """A submission of a raw model body of `length` bytes, its headers whole, no body yet."""
    s = socket.create_connection(("127.0.0.1", api.port), timeout=10, source_address=(source, 0))
    head = (
        f"POST /v1/campaigns?filename=m.tflite HTTP/1.1\r\nHost: test\r\n"
        f"Authorization: Bearer {api.uploader}\r\n"
        f"Content-Type: application/octet-stream\r\nContent-Length: {length}\r\n\r\n"
    )
    s.sendall(head.encode())
    return s


def test_a_request_body_that_stops_is_cut(api: Server) -> None:
    """Headers whole, ten bytes of a 100 kB body, then nothing: held for ever before."""
    s = start_upload(api, "127.0.1.210", 100_000)
    try:
        s.sendall(b"x" * 10)
        started = time.monotonic()
        got = answer_or_close(s, BODY_TIMEOUT_S + 10)
        assert got is not None and got.startswith(b"HTTP/1.1 408 "), got
        assert time.monotonic() - started < BODY_TIMEOUT_S + 5
    finally:
        s.close()


def test_a_body_that_trickles_is_cut(api: Server) -> None:
    """A byte every 0.3 s never pauses as long as the body timeout, but averages far under
    the least pace: cut once the body has taken the body timeout."""
    s = start_upload(api, "127.0.1.211", 100_000)
    try:
        started = time.monotonic()
        with pytest.raises(OSError):  # the server closes it while we still write
            while time.monotonic() - started < BODY_TIMEOUT_S + 10:
                s.sendall(b"x")
                time.sleep(0.3)
        assert time.monotonic() - started < BODY_TIMEOUT_S + 5
    finally:
        s.close()


def test_a_slow_upload_at_a_fair_pace_is_read_whole(api: Server) -> None:
    """3,000 bytes at about 1,000 a second, longer than the body timeout but above the
    least pace: the server reads all of it and answers the submission itself (not a model:
    400), not 408."""
    s = start_upload(api, "127.0.1.212", 3000)
    try:
        for _ in range(30):
            s.sendall(b"x" * 100)
            time.sleep(0.1)
        got = answer_or_close(s, 10)
        assert got is not None and got.startswith(b"HTTP/1.1 400 "), got
    finally:
        s.close()


def test_one_address_holds_only_so_many_connections(api: Server) -> None:
    count = PER_CLIENT_CONNECTIONS + 36
    idle = [open_slow(api.port, "127.0.2.1", first=b"") for _ in range(count)]
    try:
        assert request(api.port, "/v1/health", "127.0.2.2")[0] == 200  # another address
        time.sleep(0.5)  # well inside the header timeout: only the refused are answered
        answered, _, _ = select.select(idle, [], [], 0)
        assert len(answered) == count - PER_CLIENT_CONNECTIONS, len(answered)
        refused = [answer_or_close(s, 1.0) for s in answered]
        assert all(a == b"" or a.startswith(b"HTTP/1.1 503 ") for a in refused), refused[:3]
    finally:
        for s in idle:
            s.close()


def test_a_flood_from_one_address_gets_429_while_another_is_served(api: Server) -> None:
    flood = http.client.HTTPConnection(
        "127.0.0.1", api.port, timeout=10, source_address=("127.0.3.1", 0)
    )
    statuses, other, refused = [], [], None
    try:
        for i in range(200):
            status, response, body, _ = request(api.port, "/v1/health", "127.0.3.1", conn=flood)
            statuses.append(status)
            if status == 429 and refused is None:
                refused = (response.getheader("Retry-After"), json.loads(body))
            if i % 20 == 0:
                other.append(request(api.port, "/v1/health", "127.0.3.2")[0])
    finally:
        flood.close()
    assert statuses[:BURST] == [200] * BURST
    assert statuses.count(429) >= 150, statuses
    assert other == [200] * len(other)
    assert refused is not None
    retry_after, body = refused
    assert int(retry_after) >= 1
    assert body["error"]["status"] == 429
    assert "too many requests from this address" in body["error"]["message"]


def test_one_token_is_limited_across_addresses(api: Server) -> None:
    token = "made-up-" + "x" * 40
    statuses, messages = [], []
    for i in range(60):  # 6 a source: none over its own burst
        status, _, body, _ = request(api.port, "/v1/devices", f"127.0.4.{1 + i % 10}", token=token)
        statuses.append(status)
        if status == 429:
            messages.append(json.loads(body)["error"]["message"])
    assert statuses[:BURST] == [401] * BURST
    assert statuses.count(429) >= 30, statuses
    assert all("from this token" in m for m in messages), messages[:2]


def test_a_flood_and_slow_clients_leave_a_short_log(api: Server) -> None:
    """Issue 42: the log grew 48.8 MB in about a minute of such traffic."""
    time.sleep(LOG_WINDOW_S)  # the earlier tests' windows closed
    before = api.log.stat().st_size
    flood = http.client.HTTPConnection(
        "127.0.0.1", api.port, timeout=10, source_address=("127.0.5.1", 0)
    )
    try:
        for _ in range(2000):
            request(api.port, "/v1/campaigns", "127.0.5.1", token="wrong", conn=flood)
    finally:
        flood.close()
    slow = [open_slow(api.port, f"127.0.5.{2 + i % 4}") for i in range(200)]
    deadline = time.monotonic() + HEADER_TIMEOUT_S + 10
    for s in slow:
        answer_or_close(s, deadline - time.monotonic())
        s.close()
    grown = api.log.stat().st_size - before
    assert grown < 10_000, f"the log grew {grown} bytes:\n{api.log.read_text()[-2000:]}"
    time.sleep(LOG_WINDOW_S + 1.5)  # the windows close; the next line writes their summaries
    request(api.port, "/v1/health", "127.0.5.9")
    text = api.log.read_text(errors="replace")[before:]
    held = [int(n) for n in re.findall(r"… and (\d+) more in the last", text)]
    assert sum(held) > 2000 - 10 * LOG_REPEATS, text[-2000:]


# ---- the dashboard's login -----------------------------------------------------------------

PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory) -> Iterator[int]:
    """`devicefarm dashboard` with a shared password, on an empty farm: its port."""
    require_module("streamlit", "streamlit (the dashboard extra)")
    folder = tmp_path_factory.mktemp("dashboard-login")
    db = f"sqlite:///{folder / 'farm.db'}"
    migrated = cli("db", "upgrade", "--db", db)
    assert migrated.returncode == 0, migrated.stderr
    port, log = free_port(), folder / "dashboard.log"
    env = dict(os.environ, PYTHONPATH=str(REPO), DEVICEFARM_DASHBOARD_PASSWORD=PASSWORD)
    env.pop("DEVICEFARM_DASHBOARD_LOGIN_DELAY_S", None)  # the real back-off: 1 s doubling
    env.pop("DEVICEFARM_TOKENS", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "devicefarm.cli", "dashboard", "--db", db, "--port", str(port)],
        env=env | {"DEVICEFARM_HOME": str(folder)},
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )

    def up() -> bool:
        if proc.poll() is not None:
            pytest.fail(f"devicefarm dashboard exited:\n{log.read_text()[-3000:]}")
        try:
            return request(port, "/_stcore/health", "127.0.0.1")[0] == 200
        except OSError:
            return False

    wait_until(up, 60, "devicefarm dashboard to answer")
    yield port
    kill_group(proc)


def log_in(port: int, source: str, secret: str) -> int:
    body = urllib.parse.urlencode({"secret": secret, "next": "/"}).encode()
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    return request(port, "/_df/login", source, method="POST", body=body, headers=headers)[0]


def test_wrong_passwords_from_many_addresses_lock_no_one_out(dashboard: int) -> None:
    """Issue 42: 8 addresses x 3 wrong passwords made the right one from a ninth get 429."""
    for i in range(8):
        source = f"127.0.6.{i + 1}"
        tries = [log_in(dashboard, source, "guess") for _ in range(3)]
        assert tries[0] == 401 and set(tries) <= {401, 429}, tries  # the account's back-off
        assert log_in(dashboard, source, "guess") == 429  # that address waits
    assert log_in(dashboard, "127.0.6.9", PASSWORD) == 303  # the user gets in
    # a new address guessing at the same (only) account gets one guess, then waits too
    assert log_in(dashboard, "127.0.6.10", "guess") == 401
    assert log_in(dashboard, "127.0.6.10", PASSWORD) == 429
