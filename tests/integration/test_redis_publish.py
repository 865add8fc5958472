"""Job messages written straight into Redis (farm_core.redis_publish) against what Celery's
own `send_task` writes for the same dispatch into the same Redis: the same list, the same
envelope field by field (but the delivery tag, new for every message, and the countdown's
moment, taken a few microseconds apart)."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
import redis

from farm_core.dispatch import CeleryDispatcher, SendOrder


def _written(url: str, dispatcher: CeleryDispatcher, orders: list[SendOrder], fast: bool) -> tuple:
    """(list, message) that sending `orders` (one message's) the fast way or Celery's left in
    Redis."""
    client = redis.Redis.from_url(url)
    client.flushdb()
    publisher = dispatcher.publisher
    if not fast:
        dispatcher.publisher = None
    try:
        sent, error = dispatcher.send(orders, per_message=len(orders))
    finally:
        dispatcher.publisher = publisher
    assert (len(sent), error) == (len(orders), "")
    (key,) = client.keys()
    (raw,) = client.lrange(key, 0, -1)
    return key, json.loads(raw)


ORDERS = {
    "plain": [SendOrder(5, 2, "noop:x")],
    "urgent, a countdown, time limits": [
        SendOrder(6, 1, "noop:y", priority=3, countdown_s=2.5, soft_limit_s=10.0, hard_limit_s=20)
    ],
    "most urgent, odd key": [SendOrder(7, 4, "adb:R5CT1 04/GPU", priority=9)],
    "three dispatches of a device (run_jobs)": [
        SendOrder(8, 1, "noop:z", priority=2, soft_limit_s=30.0),
        SendOrder(9, 3, "noop:z", priority=2, soft_limit_s=30.0),
        SendOrder(12, 1, "noop:z", priority=2, soft_limit_s=30.0),
    ],
}


@pytest.mark.parametrize("name", list(ORDERS))
def test_a_message_is_what_celerys_send_task_writes(redis_url, name) -> None:
    order = ORDERS[name]
    dispatcher = CeleryDispatcher(redis_url)
    try:
        assert dispatcher.publisher is not None
        key, ours = _written(redis_url, dispatcher, order, fast=True)
        celery_key, celerys = _written(redis_url, dispatcher, order, fast=False)
    finally:
        dispatcher.close()
    assert key == celery_key
    for message in (ours, celerys):
        assert message["properties"].pop("delivery_tag")
    eta, celery_eta = ours["headers"].pop("eta"), celerys["headers"].pop("eta")
    if order[0].countdown_s:
        apart = datetime.fromisoformat(eta) - datetime.fromisoformat(celery_eta)
        assert abs(apart.total_seconds()) < 5
    else:
        assert eta is celery_eta is None
    assert ours == celerys


def test_a_broker_that_went_away_leaves_the_batch_unsent(redis_server) -> None:
    dispatcher = CeleryDispatcher(redis_server.url)
    redis_server.stop()
    try:
        sent, error = dispatcher.send(ORDERS["plain"])
    finally:
        dispatcher.close()
        redis_server.start()
    assert sent == []
    assert "ConnectionError" in error
