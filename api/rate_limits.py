"""Request rates per client address and per bearer token: token buckets, and the ASGI
middleware that answers 429 (with Retry-After) before a request reaches a route.

A bucket holds `burst` requests and refills at `rate` a second; a request takes one. Buckets
live in an LRU of `max_keys`: a flood of new addresses or made-up tokens forgets the least
recently seen (whose next request then finds a full bucket), never grows memory.
"""

from __future__ import annotations

import collections
import hashlib
import ipaddress
import math
import time
from collections.abc import Callable

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from .auth import bearer_token
from .errors import error_response

#: An IPv6 client is keyed by its /64: one host usually holds a whole /64.
IPV6_PREFIX = 64


def client_key(host: str) -> str:
    """The key a client address is counted under (an IPv6 address: its /64)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host or "unknown"
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/{IPV6_PREFIX}", strict=False))
    return str(address)


class TokenBuckets:
    """One token bucket per key, `burst` deep, refilled at `rate` a second."""

    def __init__(
        self,
        rate: float,
        burst: int,
        max_keys: int,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.rate, self.burst, self.max_keys, self.clock = rate, burst, max_keys, clock
        #: key -> (tokens, when they were counted); least recently seen first
        self._buckets: collections.OrderedDict[str, tuple[float, float]] = collections.OrderedDict()

    def wait_s(self, key: str) -> float:
        """Seconds until `key` may send a request (0: it may now)."""
        tokens = self._refilled(key)
        return 0.0 if tokens >= 1 else (1 - tokens) / self.rate

    def take(self, key: str) -> None:
        """Count one request of `key`'s (after `wait_s` said it may)."""
        self._buckets[key] = (self._refilled(key) - 1, self.clock())

    def __len__(self) -> int:
        return len(self._buckets)

    def _refilled(self, key: str) -> float:
        now = self.clock()
        tokens, then = self._buckets.get(key, (float(self.burst), now))
        self._buckets[key] = (tokens := min(self.burst, tokens + (now - then) * self.rate), now)
        self._buckets.move_to_end(key)
        while len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
        return tokens


def token_key(token: str) -> str:
    """A token's bucket key: its digest (no token is kept, however long it is)."""
    return "token:" + hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()[:32]


class RateLimit:
    """ASGI middleware: 429 for a client address or a bearer token over its rate. A request
    refused by one bucket takes nothing from the other."""

    def __init__(
        self,
        app: ASGIApp,
        per_client: TokenBuckets | None = None,
        per_token: TokenBuckets | None = None,
    ):
        self.app, self.per_client, self.per_token = app, per_client, per_token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        checks = []
        if self.per_client is not None:
            client = scope.get("client")
            checks.append((self.per_client, client_key(client[0] if client else ""), "address"))
        token = bearer_token(Request(scope)) if self.per_token is not None else None
        if token is not None:
            checks.append((self.per_token, token_key(token), "token"))
        for buckets, key, what in checks:
            wait = buckets.wait_s(key)
            if wait > 0:
                retry = max(1, math.ceil(wait))
                message = (
                    f"too many requests from this {what}: at most {buckets.rate:g} a second"
                    f" (bursts of {buckets.burst}); try again in {retry} s"
                )
                response = error_response(429, message, headers={"Retry-After": str(retry)})
                await response(scope, receive, send)
                return
        for buckets, key, _ in checks:
            buckets.take(key)
        await self.app(scope, receive, send)
