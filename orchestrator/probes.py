"""Looking into the broker for job messages: which dispatches still have a message there.

The reconciler uses it to find jobs whose message was lost (Redis restarted without
persistence). Each probe returns the task ids it saw, or None when it cannot tell.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from farm_core.celery_app import QUEUE_PREFIX, transport_options

Probe = Callable[[], "set[str] | None"]
#: kombu's Redis transport keeps delivered, unacknowledged messages in this hash.
REDIS_UNACKED_KEY = "unacked"
REDIS_SCAN_COUNT = 1000


def _ids_from_envelopes(raw_messages: list[bytes | str]) -> set[str]:
    ids = set()
    for raw in raw_messages:
        try:
            msg = json.loads(raw)
            if isinstance(msg, list):  # unacked entries are [message, exchange, routing_key]
                msg = msg[0]
            ids.add(msg["headers"]["id"])
        except (ValueError, KeyError, TypeError, IndexError):
            continue
    return ids


def redis_probe(broker_url: str) -> Probe:
    """Task ids in every device queue (all priority lists) and in the unacked hash."""
    import redis

    client = redis.Redis.from_url(broker_url)

    def probe() -> set[str] | None:
        try:
            raw: list[bytes | str] = []
            for key in client.scan_iter(match=f"{QUEUE_PREFIX}*", count=REDIS_SCAN_COUNT):
                if client.type(key) == b"list":
                    raw.extend(client.lrange(key, 0, -1))
            raw.extend(client.hvals(REDIS_UNACKED_KEY))
        except redis.RedisError:
            return None
        return _ids_from_envelopes(raw)

    return probe


def filesystem_probe(broker_url: str) -> Probe:
    """Task ids of the message files waiting in a filesystem broker's folder."""
    folder = Path(transport_options(broker_url)["data_folder_in"])

    def probe() -> set[str] | None:
        raw = []
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            return set()
        for name in names:
            try:
                raw.append((folder / name).read_bytes())
            except OSError:
                continue  # consumed meanwhile
        return _ids_from_envelopes(raw)

    return probe


def probe_for(broker_url: str) -> Probe:
    """The probe for a broker URL (one that cannot tell for unknown transports)."""
    if broker_url.startswith(("redis://", "rediss://", "unix://")):
        return redis_probe(broker_url)
    if broker_url.startswith("filesystem://"):
        return filesystem_probe(broker_url)
    return lambda: None
