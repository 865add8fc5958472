"""Serving the app with uvicorn under the limits of api/serve_settings.py: the guarded h11
protocol (header deadline, connection caps), keep-alive, header size, backlog, proxies
believed, and a log whose repeats are summarised."""

from __future__ import annotations

import dataclasses
import logging
import resource
from typing import Any

from .serve_settings import ServeSettings

#: File descriptors kept beside the connections (database pool, log, broker, imports).
SPARE_FDS = 256


def fit_open_files(settings: ServeSettings) -> tuple[ServeSettings, str]:
    """Raise the process's open-file limit to what `max_connections` needs (up to the hard
    limit); where it cannot reach, lower `max_connections` and say so. (The old failure:
    past the limit, accept() fails and queued connections, health checks among them, wait.)"""
    need = settings.max_connections + SPARE_FDS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        target = need if hard == resource.RLIM_INFINITY else min(need, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY or soft >= need:
        return settings, ""
    fitted = max(1, soft - SPARE_FDS)
    note = f"--max-connections lowered to {fitted}: the open-file limit is {soft} (ulimit -n)"
    return dataclasses.replace(settings, max_connections=fitted), note


def uvicorn_config(app: Any, host: str, port: int, settings: ServeSettings, log_level: str) -> Any:
    """The uvicorn.Config that serves `app` under `settings`."""
    import uvicorn

    from .connections import guarded_protocol
    from .log_limits import log_config

    proxies = [ip.strip() for ip in settings.forwarded_allow_ips.split(",") if ip.strip()]
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=guarded_protocol(settings),
        ws="none",  # no WebSocket routes; an upgrade would leave the guarded protocol's count
        timeout_keep_alive=settings.keep_alive_s,  # type: ignore[arg-type]  # a float works
        h11_max_incomplete_event_size=settings.max_header_bytes,
        backlog=settings.backlog,
        proxy_headers=bool(proxies),
        forwarded_allow_ips=proxies or None,
        log_config=log_config(settings),
        log_level=log_level,
        server_header=False,
    )


def serve_app(app: Any, host: str, port: int, settings: ServeSettings, log_level: str) -> None:
    """Serve `app` until interrupted; then write the log summaries still held back."""
    import uvicorn

    from .log_limits import RepeatSummary

    try:
        uvicorn.Server(uvicorn_config(app, host, port, settings, log_level)).run()
    finally:
        handlers = (
            logging.getLogger("uvicorn").handlers + logging.getLogger("uvicorn.access").handlers
        )
        for summary in {f for h in handlers for f in h.filters if isinstance(f, RepeatSummary)}:
            summary.flush()
