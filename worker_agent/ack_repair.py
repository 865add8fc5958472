"""Un-sticks a consumer whose ack failed while Redis was down (issue 16, point 1).

kombu's Redis QoS acks a message by removing it from Redis's unacked index and only then
from the channel's `_delivered` map (kombu/transport/redis.py, `QoS.ack`). When Redis is
unreachable at that moment, the removal raises, Celery logs "Couldn't ack ... ConnectionError"
and goes on, and the delivery tag stays in `_delivered` for good. With prefetch 1 the
channel then never has credit again (`QoS.can_consume` counts `_delivered`), so the
consumer never sends BRPOP again, and since nothing reads the socket, no connection error
ever reaches Celery's reconnect path: the worker looks alive and consumes nothing.

`AckRepair` is a consumer bootstep with a timer in the worker's event loop: a delivery tag
that no live request of this worker owns, seen on two rounds in a row, is acked again (which
also clears Redis's unacked index once Redis answers) or, if Redis still refuses, dropped
from the channel's books. The job itself is safe either way: the database recorded its end
before the ack, and a copy of the message redelivered later is stale (`jobs.claim`).
"""

from __future__ import annotations

import logging
from typing import Any

from celery import bootsteps

log = logging.getLogger(__name__)

#: How often the consumer looks for delivery tags no request owns.
REPAIR_EVERY_S = 2.0


def owned_tags() -> set[Any]:
    """Delivery tags of the requests this worker still knows (reserved, active, scheduled)."""
    from celery.worker import state

    live = [*state.requests.values(), *state.active_requests, *state.reserved_requests]
    return {getattr(getattr(r, "message", None), "delivery_tag", None) for r in live}


def orphaned_tags(qos: Any) -> set[Any]:
    """Tags the channel counts as delivered that no live request owns."""
    delivered = set(getattr(qos, "_delivered", None) or ())
    dirty = set(getattr(qos, "_dirty", None) or ())
    return delivered - dirty - owned_tags()


def release(qos: Any, tag: Any) -> str:
    """Ack `tag` again; if the broker still refuses, drop it from the channel's books only."""
    from kombu.transport.virtual.base import QoS as VirtualQoS

    try:
        qos.ack(tag)
        return "acked"
    except Exception as exc:  # noqa: BLE001 - the broker is still away
        log.warning("re-ack of delivery %s failed (%s); releasing its prefetch slot", tag, exc)
        VirtualQoS.ack(qos, tag)
        return "released"


class AckRepair(bootsteps.StartStopStep):
    """Consumer step: release prefetch slots held by messages whose ack failed."""

    label = "AckRepair"
    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, parent: Any, **kwargs: Any):
        super().__init__(parent, **kwargs)
        self._tref: Any = None
        self._suspects: set[Any] = set()

    def start(self, c: Any) -> None:
        self._suspects = set()
        self._tref = c.timer.call_repeatedly(REPAIR_EVERY_S, self.repair, (c,))

    def stop(self, c: Any) -> None:
        if self._tref is not None:
            self._tref.cancel()
            self._tref = None

    shutdown = stop

    def repair(self, c: Any) -> None:
        qos = getattr(getattr(c.task_consumer, "channel", None), "qos", None)
        if qos is None:
            return
        orphans = orphaned_tags(qos)
        for tag in orphans & self._suspects:
            outcome = release(qos, tag)
            log.warning("delivery %s had no request (its ack failed): %s", tag, outcome)
        self._suspects = orphans - self._suspects
