"""Sending job messages: one message per dispatch of a job, to its device's queue."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from .celery_app import (
    TASK_RUN_JOB,
    broker_priority,
    make_app,
    prepare_broker,
    queue_for,
    task_id,
)

log = logging.getLogger(__name__)


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


class Dispatcher(Protocol):
    def send(self, orders: Sequence[SendOrder]) -> tuple[list[SendOrder], str]:
        """Send what it can; returns the orders sent and the broker's error ('' if none)."""
        ...


class CeleryDispatcher:
    """Sends `devicefarm.run_job(job_id, attempt)` messages through a Celery app."""

    def __init__(self, broker_url: str):
        self.broker_url = broker_url
        prepare_broker(broker_url)
        self.app = make_app(broker_url)

    def send(self, orders: Sequence[SendOrder]) -> tuple[list[SendOrder], str]:
        from kombu.exceptions import OperationalError

        sent: list[SendOrder] = []
        if not orders:
            return sent, ""
        try:
            with self.app.producer_or_acquire() as producer:
                for o in orders:
                    self.app.send_task(
                        TASK_RUN_JOB,
                        args=[o.job_id, o.attempt],
                        queue=queue_for(o.device_key),
                        task_id=task_id(o.job_id, o.attempt),
                        priority=broker_priority(o.priority),
                        countdown=o.countdown_s or None,
                        soft_time_limit=o.soft_limit_s,
                        time_limit=o.hard_limit_s,
                        producer=producer,
                    )
                    sent.append(o)
        except (OperationalError, OSError) as exc:
            log.warning(
                "broker %s unreachable after %d of %d sends: %s",
                self.broker_url,
                len(sent),
                len(orders),
                exc,
            )
            return sent, f"{type(exc).__name__}: {exc}"
        return sent, ""

    def close(self) -> None:
        self.app.close()
