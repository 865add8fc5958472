"""Job messages written straight into the Redis lists kombu's transport reads, as Celery's
`send_task` writes them, in pipelines.

Celery's `send_task` costs about 0.1 ms of Python per message (the task message's headers,
the argument's safe repr, kombu's producer): 8,000 messages, a fleet's queues filled once,
took 0.85 s of a reconciler pass. Every job message differs only in its job, attempt,
queue, priority, countdown and time limits, so the rest of Celery's envelope is made once
per publisher, by Celery itself (`amqp.as_task_v2`), and each message is a copy with those
fields set. tests/integration/test_redis_publish.py holds each form of message to what
`send_task` writes into the same Redis.
"""

from __future__ import annotations

import base64
import copy
import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from kombu.transport.redis import Channel

from .celery_app import REDIS_PRIORITY_STEPS, TASK_RUN_JOB, broker_priority, queue_for, task_call

#: Celery's body after the arguments: no keyword arguments, no callbacks, chain or chord.
_EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}
#: A Redis command with no answer after this long fails (the send is then retried later).
SOCKET_TIMEOUT_S = 10.0


def serves(broker_url: str) -> bool:
    """Whether `broker_url` is a Redis server this publisher can write to."""
    return broker_url.startswith(("redis://", "rediss://"))


class RedisPublisher:
    """`publish(parts)`: one LPUSH per message, SEND_BATCH to a pipeline."""

    def __init__(self, app: Any, broker_url: str):
        import redis

        headers, properties, _body, _event = app.amqp.as_task_v2(
            "", TASK_RUN_JOB, args=[], kwargs={}, ignore_result=None
        )
        self._headers = dict(headers)
        self._reply_to = properties.get("reply_to") or app.thread_oid
        self.client = redis.Redis.from_url(
            broker_url, socket_timeout=SOCKET_TIMEOUT_S, socket_connect_timeout=SOCKET_TIMEOUT_S
        )

    def message(self, part: Sequence[Any], now: datetime | None = None) -> tuple[str, str]:
        """(list, JSON) for the message that carries `part` (dispatch.SendOrder of one
        device: dispatch.messages)."""
        order = part[0]
        task, args, tid = task_call([(o.job_id, o.attempt) for o in part])
        headers = copy.copy(self._headers)
        headers["task"] = task
        headers["id"] = headers["root_id"] = tid
        headers["argsrepr"] = repr(args)
        headers["timelimit"] = [order.hard_limit_s, order.soft_limit_s]
        if order.countdown_s:
            eta = (now or datetime.now(UTC)) + timedelta(seconds=order.countdown_s)
            headers["eta"] = eta.isoformat()
        body = json.dumps([args, {}, _EMBED]).encode()
        queue = queue_for(order.device_key)
        priority = broker_priority(order.priority)
        envelope = {
            "body": base64.b64encode(body).decode(),
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": headers,
            "properties": {
                "correlation_id": tid,
                "reply_to": self._reply_to,
                "delivery_mode": 2,
                "delivery_info": {"exchange": "", "routing_key": queue},
                "priority": priority,
                "body_encoding": "base64",
                "delivery_tag": str(uuid.uuid4()),
            },
        }
        return _list_for(queue, priority), json.dumps(envelope)

    def publish(self, parts: Sequence[Sequence[Any]]) -> None:
        """Push the messages of `parts` (each the orders one message carries) in one
        pipeline (redis-py's errors propagate: a failed pipeline may have delivered part of
        it)."""
        pipe = self.client.pipeline(transaction=False)
        now = datetime.now(UTC)
        for part in parts:
            pipe.lpush(*self.message(part, now))
        pipe.execute()

    def close(self) -> None:
        self.client.close()


def _list_for(queue: str, priority: int) -> str:
    """The list kombu's Redis transport keeps `priority` of `queue` in (its `_q_for_pri`:
    the step at or below it; the queue itself for step 0, else queue, separator, step)."""
    step = max((s for s in REDIS_PRIORITY_STEPS if s <= priority), default=0)
    return f"{queue}{Channel.sep}{step}" if step else queue
