"""A message Redis popped for a device's BRPOP as it was killed (the reply unread, the pop
already in its append-only file) is only in the group's socket: the group reads it before
forgetting the channel and puts it back once Redis answers again (worker_agent/group.py
`_rescue_replies`, `_put_back_rescued`), on a real redis-server killed with SIGKILL."""

from __future__ import annotations

import json
import shutil
import socket
from types import SimpleNamespace

import pytest
import redis

from farm_core.celery_app import queue_for, transport_options
from labkit.redis_server import RedisServer
from tests.conftest import require
from tests.support.farm import free_port

pytestmark = pytest.mark.integration


def test_a_message_popped_as_redis_was_killed_is_put_back(tmp_path):
    from kombu import Connection, Consumer, Exchange, Queue

    from worker_agent.group import DeviceGroup

    require(shutil.which("redis-server") is not None, "redis-server")
    (tmp_path / "redis").mkdir()
    server = RedisServer(free_port(), tmp_path / "redis", persistent=True)
    server.start()
    try:
        group = DeviceGroup(f"sqlite:///{tmp_path}/farm.db", server.url)
        conn = Connection(server.url, transport_options=transport_options(server.url))
        conn.connect()
        channel = conn.channel()
        channel.brpop_timeout = 30
        name = queue_for("noop:a")
        consumer = Consumer(channel, [Queue(name, Exchange(name), routing_key=name)])
        consumer.consume()
        with pytest.raises((socket.timeout, TimeoutError)):
            conn.drain_events(timeout=0.3)  # nothing yet: the BRPOP stays in flight
        assert channel._in_poll is not None
        message = json.dumps({"headers": {"id": "df-job-1-1"}, "body": ""}).encode()
        client = redis.Redis.from_url(server.url)
        client.lpush(name, message)  # Redis pops it for the BRPOP and answers
        client.close()
        server.stop()  # SIGKILL before the group reads the answer
        group.conn = conn
        group.slots = {"noop:a": SimpleNamespace(channel=channel, consumer=consumer)}
        group._lost(ConnectionError("Connection closed by server."))
        assert group._rescued == [(name.encode(), message)]
        server.start()  # from its append-only file: the pop was kept, the message gone
        client = redis.Redis.from_url(server.url)
        assert client.llen(name) == 0
        group._put_back_rescued()
        assert client.lrange(name, 0, -1) == [message] and group._rescued == []
        client.close()
    finally:
        server.stop()


def test_with_redis_still_away_the_rescued_messages_wait(tmp_path):
    from worker_agent.group import DeviceGroup

    group = DeviceGroup(f"sqlite:///{tmp_path}/farm.db", f"redis://127.0.0.1:{free_port()}/0")
    group._rescued = [(b"q", b"m")]
    group._put_back_rescued()  # nothing listens there: kept for the next round
    assert group._rescued == [(b"q", b"m")]
