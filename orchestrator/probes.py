"""Looking into the broker for job messages: which dispatches still have a message there.

The reconciler uses it to find jobs whose message was lost (Redis restarted without
persistence). A probe is called with the queues to read (those of the devices holding a
dispatch past the grace), or with none for all the broker holds, and returns the task ids
it saw, or None when it cannot tell.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path

from farm_core.celery_app import (
    QUEUE_PREFIX,
    REDIS_PRIORITY_STEPS,
    dispatch_task_ids,
    transport_options,
)

Probe = Callable[..., "set[str] | None"]  #: (queues=None) -> task ids seen, or None
#: kombu's Redis transport keeps delivered, unacknowledged messages in this hash.
REDIS_UNACKED_KEY = "unacked"
REDIS_SCAN_COUNT = 1000


#: A job message's task id as kombu and farm_core.redis_publish write its headers: the
#: first `"id"` key of the envelope (`root_id` and `correlation_id` end in `_id"`).
_HEADER_ID = re.compile(rb'"headers": \{[^{}]*?"id": "([^"\\]+)"')


def task_ids(raw_messages: list[bytes | str]) -> set[str]:
    """Task ids of the dispatches in kombu envelopes (or unacked entries: [message,
    exchange, routing key]; a message carrying several dispatches counts for each),
    found by pattern, else by parsing (7x slower: thousands of messages a pass)."""
    ids: set[str] = set()
    for raw in raw_messages:
        data = raw.encode() if isinstance(raw, str) else raw
        m = _HEADER_ID.search(data)
        if m is not None:
            ids.update(dispatch_task_ids(m[1].decode()))
            continue
        try:
            msg = json.loads(data)
            if isinstance(msg, list):
                msg = msg[0]
            ids.update(dispatch_task_ids(str(msg["headers"]["id"])))
        except (ValueError, KeyError, TypeError, IndexError):
            continue
    return ids


def priority_lists(queue: str) -> list[str]:
    """The Redis lists that hold `queue`'s messages, one per priority step (kombu's names:
    the queue itself for step 0, else the queue, kombu's separator and the step)."""
    from kombu.transport.redis import Channel

    return [queue if step == 0 else f"{queue}{Channel.sep}{step}" for step in REDIS_PRIORITY_STEPS]


class RedisProbe:
    """Task ids in the given device queues (all priority lists), or in every one, and in
    the unacked hash.

    A probe scans for the queues' lists that exist (of the given queues, or all), then
    reads them and the hash in one transaction (MULTI/EXEC: one round trip, 9x faster than
    a read per list with 1,000 queues, `bench/probe_scale.py`; reading every priority list
    of 1,000 queues by name, most of them empty, took a fleet's probe 0.94-2.80 s against
    0.31-0.69 s so). A message whose list was empty at the scan and which moved from the
    hash back to its list before the read (a consumer's take-back after a Redis restart) is
    in neither: `recheck` reads the candidates' own queues and the hash in one transaction,
    and the reconciler calls a message lost only when that snapshot lacks it too, in every
    pass for `lost_confirm_s` (`missing_since`)."""

    def __init__(self, broker_url: str):
        import redis

        self.client = redis.Redis.from_url(broker_url)
        #: task id -> when the reconciler first found it missing, and its device
        #: (lost_messages.confirmed)
        self.missing_since: dict[str, tuple[datetime, str]] = {}
        #: device -> when a pass last looked at it (look_turns)
        self.looked_at: dict[str, datetime] = {}

    def __call__(self, queues: Iterable[str] | None = None) -> set[str] | None:
        import redis

        try:
            keys = list(self.client.scan_iter(match=f"{QUEUE_PREFIX}*", count=REDIS_SCAN_COUNT))
            if queues is not None:
                wanted = {name for queue in queues for name in priority_lists(queue)}
                keys = [k for k in keys if k.decode() in wanted]
            with self.client.pipeline(transaction=True) as pipe:
                for key in keys:
                    pipe.lrange(key, 0, -1)
                pipe.hvals(REDIS_UNACKED_KEY)
                *lists, unacked = pipe.execute(raise_on_error=False)
        except redis.RedisError:
            return None
        if isinstance(unacked, Exception):
            return None
        # a key of the queues' prefix that is no list answers WRONGTYPE: not a queue
        raw = [m for got in lists if isinstance(got, list) for m in got]
        return task_ids(raw + list(unacked))

    def recheck(self, queues: Iterable[str]) -> set[str] | None:
        """Task ids in `queues` and the unacked hash, read at one instant (MULTI/EXEC);
        None when the broker cannot be read."""
        import redis

        try:
            with self.client.pipeline(transaction=True) as pipe:
                for queue in queues:
                    for name in priority_lists(queue):
                        pipe.lrange(name, 0, -1)
                pipe.hvals(REDIS_UNACKED_KEY)
                *lists, unacked = pipe.execute()
        except redis.RedisError:
            return None
        return task_ids([m for got in lists for m in got] + list(unacked))


def redis_probe(broker_url: str) -> Probe:
    return RedisProbe(broker_url)


class FilesystemProbe:
    """Task ids of the message files waiting in a filesystem broker's folder."""

    def __init__(self, broker_url: str):
        self.folder = Path(transport_options(broker_url)["data_folder_in"])
        #: task id -> when the reconciler first found it missing, and its device
        #: (lost_messages.confirmed)
        self.missing_since: dict[str, tuple[datetime, str]] = {}
        #: device -> when a pass last looked at it (look_turns)
        self.looked_at: dict[str, datetime] = {}

    def __call__(self, queues: Iterable[str] | None = None) -> set[str] | None:
        """Every waiting message's task id (the folder holds every queue's messages)."""
        raw = []
        try:
            names = os.listdir(self.folder)
        except FileNotFoundError:
            return set()
        for name in names:
            try:
                raw.append((self.folder / name).read_bytes())
            except OSError:
                continue  # consumed meanwhile
        return task_ids(raw)


def filesystem_probe(broker_url: str) -> Probe:
    return FilesystemProbe(broker_url)


def probe_for(broker_url: str) -> Probe:
    """The probe for a broker URL (one that cannot tell for unknown transports)."""
    if broker_url.startswith(("redis://", "rediss://", "unix://")):
        return redis_probe(broker_url)
    if broker_url.startswith("filesystem://"):
        return filesystem_probe(broker_url)
    return lambda queues=None: None
