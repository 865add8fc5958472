"""uvicorn's h11 protocol with the guards it lacks: a deadline on a request's headers, a
pace for its body, and caps on open connections, in all and per client address.

uvicorn arms no timer until a first response is sent, so a connection that never finishes
its headers was held for ever (issue 42: 20,100 of them made /v1/health time out). Here a
request's headers must be whole `header_timeout_s` after the connection opens, or after the
first byte of a keep-alive connection's next request; otherwise the client gets 408 and the
connection is closed. Its body then may pause at most `body_timeout_s` between two reads,
and once it has taken that long must average `min_body_rate` bytes a second (a byte a
minute is no upload): else 408 and closed too. Pauses the server asked for (uvicorn stops
reading while the app has not taken what came) never count. A connection over a cap gets
503 and is closed before a byte is read.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from .rate_limits import client_key
from .serve_settings import ServeSettings

log = logging.getLogger("api.connections")

TIMED_OUT = b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
FULL = (
    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\n"
    b"Content-Length: 0\r\n\r\n"
)


class GuardedH11Protocol(H11Protocol):
    """H11Protocol with a header deadline and connection caps (`guarded_protocol` makes
    the class for one server's settings)."""

    settings: ServeSettings = ServeSettings()
    #: open connections per client key, shared by the server's connections
    per_client: collections.Counter[str] = collections.Counter()

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._key: str | None = None  # None: refused (or not yet made)
        self._deadline: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._body_started = 0.0  # monotonic s when this request's headers were whole
        self._body_bytes = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        peer = transport.get_extra_info("peername")
        key = client_key(peer[0] if isinstance(peer, tuple) else "")
        why = self._over_cap(key)
        if why:
            log.warning("refused a connection from %s: %s", key, why,
                        extra={"summary_key": ("refused", key)})  # fmt: skip
            transport.write(FULL)
            transport.close()
            return
        self._key = key
        self.per_client[key] += 1
        super().connection_made(transport)
        self._arm()

    def _over_cap(self, key: str) -> str:
        cap, per = self.settings.max_connections, self.settings.max_connections_per_client
        if len(self.connections) >= cap:
            return f"{cap} connections open (--max-connections)"
        if per and self.per_client[key] >= per:
            return f"{per} connections open from it (--max-connections-per-client)"
        return ""

    def connection_lost(self, exc: Exception | None) -> None:
        if self._key is None:  # refused: nothing of the parent's was made
            return
        self._disarm()
        self._stop_body_timer()
        self.per_client[self._key] -= 1
        if self.per_client[self._key] <= 0:
            del self.per_client[self._key]
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._deadline is None and self.conn.their_state is h11.IDLE:
            self._arm()  # the first byte of a keep-alive connection's next request
        in_body = self._body_timer is not None
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm()  # the headers are whole: the request is the app's now
        if self.conn.their_state is h11.SEND_BODY:
            self._body_read(len(data) if in_body else 0)
        else:
            self._stop_body_timer()

    def on_response_complete(self) -> None:
        self._disarm()  # idle until the next request's first byte: keep-alive's timer
        super().on_response_complete()

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.settings.header_timeout_s, self._timed_out)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _body_read(self, count: int) -> None:
        """`count` more bytes of the body came (0: its headers just ended): a slow one is
        cut; else the pause timer starts again."""
        now = time.monotonic()
        if self._body_timer is None:
            self._body_started, self._body_bytes = now, 0
        self._body_bytes += count
        if self._too_slow(now):
            self._cut_body(f"averaged under {self.settings.min_body_rate:g} bytes/s")
            return
        self._stop_body_timer()
        self._body_timer = self.loop.call_later(self.settings.body_timeout_s, self._body_paused)

    def _too_slow(self, now: float) -> bool:
        took = now - self._body_started
        rate = self.settings.min_body_rate
        return bool(rate) and took > self.settings.body_timeout_s and self._body_bytes < rate * took

    def _body_paused(self) -> None:
        self._body_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.SEND_BODY:
            return
        if self.flow.read_paused:  # the server's pause, not the client's: wait again
            self._body_timer = self.loop.call_later(self.settings.body_timeout_s, self._body_paused)
            return
        self._cut_body(f"paused over {self.settings.body_timeout_s:g} s")

    def _cut_body(self, why: str) -> None:
        self._stop_body_timer()
        log.warning("closed a connection from %s: its request's body %s", self._key, why,
                    extra={"summary_key": ("408-body", self._key)})  # fmt: skip
        if self.conn.our_state is h11.SEND_RESPONSE:  # the app has not begun to answer
            self.transport.write(TIMED_OUT)
        self.transport.close()

    def _stop_body_timer(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _timed_out(self) -> None:
        self._deadline = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        log.warning("closed a connection from %s: no whole headers in %g s", self._key,
                    self.settings.header_timeout_s, extra={"summary_key": ("408", self._key)})  # fmt: skip
        self.transport.write(TIMED_OUT)
        self.transport.close()


def guarded_protocol(settings: ServeSettings) -> type[GuardedH11Protocol]:
    """The protocol class for one server: its settings and its own connection counts."""
    return type(
        "GuardedH11Protocol",
        (GuardedH11Protocol,),
        {"settings": settings, "per_client": collections.Counter()},
    )
