"""Request rates per address and per token (issue 42): token buckets in a bounded LRU, and
the middleware's 429 with Retry-After and the API's JSON error."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.conftest import require_module

require_module("starlette", "starlette (the api extra)")

from api.rate_limits import RateLimit, TokenBuckets, client_key, token_key  # noqa: E402
from tests.support.clock import Clock  # noqa: E402


def test_a_bucket_lets_a_burst_through_then_its_rate() -> None:
    clock = Clock()
    b = TokenBuckets(rate=2.0, burst=3, max_keys=10, clock=clock)
    for _ in range(3):
        assert b.wait_s("a") == 0
        b.take("a")
    assert b.wait_s("a") == pytest.approx(0.5)
    clock.now += 0.5
    assert b.wait_s("a") == 0
    assert b.wait_s("b") == 0  # keys apart


def test_a_bucket_never_holds_more_than_its_burst() -> None:
    clock = Clock()
    b = TokenBuckets(rate=100.0, burst=2, max_keys=10, clock=clock)
    b.take("a")
    clock.now += 3600
    b.take("a")
    b.take("a")
    assert b.wait_s("a") > 0


def test_keys_remembered_are_bounded_least_recent_first() -> None:
    b = TokenBuckets(rate=1.0, burst=1, max_keys=100, clock=Clock())
    b.take("kept")
    for i in range(1000):
        b.wait_s("kept")
        b.wait_s(f"new{i}")
    assert len(b) == 100 and b.wait_s("kept") > 0


@pytest.mark.parametrize(
    ("host", "key"),
    [
        ("10.1.2.3", "10.1.2.3"),
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:bbbb::9", "2001:db8:1:2::/64"),
        ("::ffff:10.1.2.3", "10.1.2.3"),
        ("", "unknown"),
        ("testclient", "testclient"),
    ],
)
def test_client_keys(host: str, key: str) -> None:
    assert client_key(host) == key


def test_a_token_key_keeps_no_token() -> None:
    key = token_key("secret" * 1000)
    assert "secret" not in key and len(key) < 64


async def _ok(scope, receive, send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def _call(app, client: str, token: str | None = None) -> tuple[int, dict, bytes]:
    headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/v1/devices",
        "headers": headers,
        "client": (client, 5000),
        "query_string": b"",
    }
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    start = sent[0]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}, body


def test_the_middleware_answers_429_with_retry_after_and_a_json_error() -> None:
    app = RateLimit(_ok, per_client=TokenBuckets(0.5, 2, 100), per_token=None)
    assert [_call(app, "10.0.0.1")[0] for _ in range(2)] == [200, 200]
    status, headers, body = _call(app, "10.0.0.1")
    assert status == 429 and headers["retry-after"] == "2"
    error = json.loads(body)["error"]
    assert error["status"] == 429 and "from this address" in error["message"]
    assert _call(app, "10.0.0.2")[0] == 200


def test_a_token_is_limited_from_any_address_and_a_refusal_takes_nothing() -> None:
    per_client, per_token = TokenBuckets(1e-3, 5, 100), TokenBuckets(1e-3, 3, 100)
    app = RateLimit(_ok, per_client=per_client, per_token=per_token)
    assert [_call(app, f"10.0.0.{i}", "t")[0] for i in range(3)] == [200] * 3
    status, _, body = _call(app, "10.0.0.9", "t")
    assert status == 429 and "from this token" in json.loads(body)["error"]["message"]
    assert _call(app, "10.0.0.9")[0] == 200  # the refusal took nothing from its address
    assert per_client.wait_s("10.0.0.9") == 0
