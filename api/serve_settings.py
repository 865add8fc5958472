"""The API server's limits against hostile clients, declared once: each with its default,
its environment variable and its `devicefarm api` flag (the flag wins, then the variable).

No Starlette or uvicorn here: the CLI reads these to build its `--help`."""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class ServeSettings:
    """Connection, header, rate and log limits of one `devicefarm api` server."""

    #: s a connection has to send a request's headers whole (from its first byte on)
    header_timeout_s: float = 10.0
    #: s a request's body may pause between two reads (nginx's client_body_timeout)
    body_timeout_s: float = 30.0
    #: bytes a second a body must average once it has taken body_timeout_s (0: any pace)
    min_body_rate: float = 1024.0
    #: s an idle keep-alive connection stays open between requests
    keep_alive_s: float = 5.0
    #: open connections at most; more are answered 503 and closed before any byte is read
    max_connections: int = 2048
    #: open connections from one client address at most (0: no cap, e.g. behind a proxy)
    max_connections_per_client: int = 64
    #: bytes of a request line and headers at most (400 beyond: h11's incomplete-event cap)
    max_header_bytes: int = 16 * 1024
    #: connections the kernel queues before the server accepts them
    backlog: int = 1024
    #: requests a second one client address may sustain (0: no limit)
    rate_per_client: float = 20.0
    #: requests one client address may send at once before its rate applies
    burst_per_client: int = 100
    #: requests a second one bearer token may sustain, from any address (0: no limit)
    rate_per_token: float = 10.0
    #: requests one bearer token may send at once before its rate applies
    burst_per_token: int = 100
    #: client addresses and tokens whose rates are remembered (least recent forgotten)
    tracked_clients: int = 10_000
    #: log lines of one kind from one client per window; the rest are counted and summarised
    log_repeats: int = 5
    #: s of a log summary's window
    log_window_s: float = 60.0
    #: proxies whose X-Forwarded-For is believed (comma-separated; empty: none)
    forwarded_allow_ips: str = ""


@dataclass(frozen=True)
class Knob:
    field: str
    env: str
    parse: Callable[[str], float | int | str]
    help: str


def _number(kind: type, low: float) -> Callable[[str], float | int]:
    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a {kind.__name__}") from None
        if not (math.isfinite(value) and value >= low):
            raise ValueError(f"{text!r} must be a finite number of at least {low:g}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its error
    return parse


def _proxies(text: str) -> str:
    """Comma-separated IP addresses or networks (uvicorn's forwarded_allow_ips), or `*`."""
    entries = [e.strip() for e in text.split(",") if e.strip()]
    for entry in entries:
        if entry == "*":
            continue
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            raise ValueError(f"{entry[:60]!r} is not an IP address or network") from None
    return ",".join(entries)


_proxies.__name__ = "address list"  # argparse names the type in its error

_S, _N, _R = _number(float, 0.001), _number(int, 1), _number(float, 0.0)
_N0 = _number(int, 0)

KNOBS = (
    Knob("header_timeout_s", "DEVICEFARM_API_HEADER_TIMEOUT_S", _S,
         "seconds a connection has to send a request's headers whole; then 408 and closed"),
    Knob("body_timeout_s", "DEVICEFARM_API_BODY_TIMEOUT_S", _S,
         "seconds a request's body may pause between two reads; then 408 and closed"),
    Knob("min_body_rate", "DEVICEFARM_API_MIN_BODY_RATE", _R,
         "bytes a second a body must average once it has taken the body timeout (0: any)"),
    Knob("keep_alive_s", "DEVICEFARM_API_KEEP_ALIVE_S", _S,
         "seconds an idle keep-alive connection stays open"),
    Knob("max_connections", "DEVICEFARM_API_MAX_CONNECTIONS", _N,
         "open connections at most; more get 503 and are closed at once"),
    Knob("max_connections_per_client", "DEVICEFARM_API_MAX_CONNECTIONS_PER_CLIENT", _N0,
         "open connections from one address at most (0: no cap; behind a proxy)"),
    Knob("max_header_bytes", "DEVICEFARM_API_MAX_HEADER_BYTES", _N,
         "bytes of a request's line and headers at most"),
    Knob("backlog", "DEVICEFARM_API_BACKLOG", _N,
         "connections the kernel queues before they are accepted"),
    Knob("rate_per_client", "DEVICEFARM_API_RATE_PER_CLIENT", _R,
         "requests a second one address may sustain (0: no limit); 429 beyond"),
    Knob("burst_per_client", "DEVICEFARM_API_BURST_PER_CLIENT", _N,
         "requests one address may send at once before its rate applies"),
    Knob("rate_per_token", "DEVICEFARM_API_RATE_PER_TOKEN", _R,
         "requests a second one bearer token may sustain (0: no limit); 429 beyond"),
    Knob("burst_per_token", "DEVICEFARM_API_BURST_PER_TOKEN", _N,
         "requests one token may send at once before its rate applies"),
    Knob("tracked_clients", "DEVICEFARM_API_TRACKED_CLIENTS", _N,
         "addresses and tokens whose rates are remembered"),
    Knob("log_repeats", "DEVICEFARM_API_LOG_REPEATS", _N,
         "log lines of one kind from one client per window before they are summarised"),
    Knob("log_window_s", "DEVICEFARM_API_LOG_WINDOW_S", _S,
         "seconds of a log summary's window"),
    Knob("forwarded_allow_ips", "DEVICEFARM_API_FORWARDED_ALLOW_IPS", _proxies,
         "proxies whose X-Forwarded-For names the client (comma-separated)"),
)  # fmt: skip


def _flag(knob: Knob) -> str:
    return "--" + knob.field.replace("_", "-")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """One flag per knob (default None: the environment's value, else the default)."""
    group = p.add_argument_group("limits against hostile clients")
    defaults = ServeSettings()
    for knob in KNOBS:
        default = getattr(defaults, knob.field)
        group.add_argument(
            _flag(knob),
            type=knob.parse,
            default=None,
            metavar="IPS" if knob.parse is _proxies else "S" if knob.field.endswith("_s") else "N",
            help=f"{knob.help} (default: ${knob.env} or {default if default != '' else 'none'})",
        )


def from_env(env: Mapping[str, str] | None = None) -> ServeSettings:
    """The defaults, with each variable of `env` (os.environ) that is set; ValueError names
    the variable whose value is bad."""
    env = os.environ if env is None else env
    values = {}
    for knob in KNOBS:
        raw = env.get(knob.env, "").strip()
        if raw:
            try:
                values[knob.field] = knob.parse(raw)
            except ValueError as exc:
                raise ValueError(f"${knob.env}: {exc}") from None
    return ServeSettings(**values)


def from_args(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> ServeSettings:
    """The environment's settings with the flags given on top."""
    given = {
        k.field: getattr(args, k.field) for k in KNOBS if getattr(args, k.field, None) is not None
    }
    return dataclasses.replace(from_env(env), **given)
