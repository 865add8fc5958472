"""Sending job messages to their devices' queues: one message per dispatch of a job, or, where
the sender asks for it (`per_message`), a device's next dispatches together in one message
(`devicefarm.run_jobs`; worker_agent.batches says when and why)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

from . import redis_publish
from .celery_app import (
    broker_priority,
    make_app,
    prepare_broker,
    queue_for,
    task_call,
)

log = logging.getLogger(__name__)

#: Messages per broker round trip (a Redis pipeline; other transports send one at a time).
SEND_BATCH = 500


@dataclass(frozen=True)
class SendOrder:
    """Send dispatch `attempt` of job `job_id` to `device_key`'s queue."""

    job_id: int
    attempt: int
    device_key: str
    priority: int = 0
    countdown_s: float = 0.0  #: retry backoff
    soft_limit_s: float | None = None
    hard_limit_s: float | None = None

    def message_key(self) -> tuple[Any, ...]:
        """What a message states once for all its dispatches."""
        return (
            self.device_key,
            self.priority,
            self.countdown_s,
            self.soft_limit_s,
            self.hard_limit_s,
        )


def messages(orders: Sequence[SendOrder], per_message: int = 1) -> list[list[SendOrder]]:
    """`orders` as messages: each at most `per_message` dispatches of one device that share
    priority, countdown and time limits, in the order given (a device's picks stay in
    their order)."""
    if per_message <= 1:
        return [[o] for o in orders]
    out: list[list[SendOrder]] = []
    open_: dict[tuple[Any, ...], list[SendOrder]] = {}
    for o in orders:
        key = o.message_key()
        part = open_.get(key)
        if part is None or len(part) >= per_message:
            part = open_[key] = []
            out.append(part)
        part.append(o)
    return out


class Dispatcher(Protocol):
    def send(
        self, orders: Sequence[SendOrder], per_message: int = 1
    ) -> tuple[list[SendOrder], str]:
        """Send what it can, up to `per_message` dispatches of a device in one message;
        returns the orders sent and the broker's error ('' if none)."""
        ...


class CeleryDispatcher:
    """Sends `devicefarm.run_job(job_id, attempt)` messages (`devicefarm.run_jobs([[job_id,
    attempt], ...])` for several) through a Celery app; to Redis, written straight into the
    transport's lists as Celery writes them (redis_publish.py)."""

    def __init__(self, broker_url: str):
        self.broker_url = broker_url
        prepare_broker(broker_url)
        self.app = make_app(broker_url)
        self.publisher: Any = None
        if redis_publish.serves(broker_url):
            self.publisher = redis_publish.RedisPublisher(self.app, broker_url)

    def send(
        self, orders: Sequence[SendOrder], per_message: int = 1
    ) -> tuple[list[SendOrder], str]:
        """Send in batches of SEND_BATCH messages; an order counts as sent once its batch is
        flushed (a batch that failed may have been delivered in part: its orders count as
        unsent, and a second message for one dispatch is stale at its claim)."""
        from kombu.exceptions import KombuError

        sent: list[SendOrder] = []
        if not orders:
            return sent, ""
        parts = messages(orders, per_message)
        if self.publisher is not None:
            return self._publish(parts, orders)
        try:
            with self.app.producer_or_acquire() as producer:
                batched = getattr(producer, "batch", None)  # kombu 5.7+; else one at a time
                for start in range(0, len(parts), SEND_BATCH):
                    batch = parts[start : start + SEND_BATCH]
                    # flushed as it exits
                    with batched(max_size=2 * SEND_BATCH) if batched else nullcontext():
                        for part in batch:
                            self._send(part, producer)
                    sent.extend(o for part in batch for o in part)
        except (KombuError, OSError) as exc:  # BatchPublishError, OperationalError
            return self._unreachable(sent, orders, exc)
        return sent, ""

    def _publish(
        self, parts: list[list[SendOrder]], orders: Sequence[SendOrder]
    ) -> tuple[list[SendOrder], str]:
        from redis.exceptions import RedisError

        sent: list[SendOrder] = []
        for start in range(0, len(parts), SEND_BATCH):
            batch = parts[start : start + SEND_BATCH]
            try:
                self.publisher.publish(batch)
            except (RedisError, OSError) as exc:
                return self._unreachable(sent, orders, exc)
            sent.extend(o for part in batch for o in part)
        return sent, ""

    def _unreachable(
        self, sent: list[SendOrder], orders: Sequence[SendOrder], exc: BaseException
    ) -> tuple[list[SendOrder], str]:
        log.warning(
            "broker %s unreachable after %d of %d sends: %s",
            self.broker_url,
            len(sent),
            len(orders),
            exc,
        )
        return sent, f"{type(exc).__name__}: {exc}"

    def _send(self, part: list[SendOrder], producer: Any) -> None:
        o = part[0]
        name, args, tid = task_call([(o.job_id, o.attempt) for o in part])
        self.app.send_task(
            name,
            args=args,
            task_id=tid,
            queue=queue_for(o.device_key),
            priority=broker_priority(o.priority),
            countdown=o.countdown_s or None,
            soft_time_limit=o.soft_limit_s,
            time_limit=o.hard_limit_s,
            producer=producer,
            # NOTE: not declared: the message goes to the queue's list by name (Celery's
            # anonymous exchange) and its worker declares the queue; declaring cost three
            # Redis round trips per new queue, 1,000 in a 1,000-device campaign.
            declare=[],
        )

    def close(self) -> None:
        if self.publisher is not None:
            self.publisher.close()
        self.app.close()
