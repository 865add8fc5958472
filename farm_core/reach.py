"""A broker server the farm was told to use, reached once as a command starts: a typo'd
or unreachable host is one line within CONNECT_TIMEOUT_S, where Celery's consumer would
retry it forever. (The database is reached as it is opened: make_engine gives PostgreSQL
the same connect timeout.)"""

from __future__ import annotations

from delegate_runtime.errors import JobError

from .service_urls import shown
from .settings import CONNECT_TIMEOUT_S


def reach_broker(url: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Ping a Redis broker (JobError when it does not answer within `timeout_s`); a
    filesystem broker is a local folder, nothing to reach."""
    if url.partition("://")[0] not in ("redis", "rediss"):
        return
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise JobError(
            f"cannot reach the broker {shown(url)} (waited at most {timeout_s:g} s): {why}"
        ) from exc
    finally:
        client.close()
