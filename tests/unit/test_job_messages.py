"""Messages that carry several dispatches of one device (`devicefarm.run_jobs`): how orders
are grouped into them, what their envelope says, and how the reconciler's probe and a
device group read them back."""

from __future__ import annotations

import base64
import json

import pytest

from farm_core.celery_app import (
    TASK_RUN_JOB,
    TASK_RUN_JOBS,
    dispatch_task_ids,
    make_app,
    task_call,
    task_id,
)
from farm_core.dispatch import SendOrder, messages
from farm_core.redis_publish import RedisPublisher
from orchestrator.probes import task_ids
from worker_agent.celery_message import BadMessage, decode

BROKER = "redis://127.0.0.1:1/0"  # never reached: envelopes are only built


def test_one_dispatch_per_message_unless_asked() -> None:
    orders = [SendOrder(i, 1, "noop:a") for i in range(5)]
    assert messages(orders) == [[o] for o in orders]


def test_a_message_carries_one_devices_dispatches_that_share_its_settings() -> None:
    a = [SendOrder(i, 1, "noop:a") for i in range(5)]
    b = [SendOrder(10 + i, 2, "noop:b") for i in range(2)]
    urgent = SendOrder(20, 1, "noop:a", priority=5)
    retry = SendOrder(21, 3, "noop:a", countdown_s=4.0)
    got = messages([*a[:3], *b, urgent, *a[3:], retry], per_message=2)
    assert got == [a[0:2], [a[2], a[3]], b, [urgent], [a[4]], [retry]]


def test_task_ids_of_a_batch_name_each_dispatch() -> None:
    name, args, tid = task_call([(8, 1), (9, 3)])
    assert (name, args) == (TASK_RUN_JOBS, [[[8, 1], [9, 3]]])
    assert dispatch_task_ids(tid) == [task_id(8, 1), task_id(9, 3)]
    assert task_call([(8, 1)]) == (TASK_RUN_JOB, [8, 1], task_id(8, 1))
    assert dispatch_task_ids(task_id(8, 1)) == [task_id(8, 1)]


def envelope(orders: list[SendOrder]) -> bytes:
    publisher = RedisPublisher(make_app(BROKER), BROKER)
    _, raw = publisher.message(orders)
    return raw.encode()


def test_the_probe_sees_every_dispatch_of_a_batch_in_queue_and_unacked() -> None:
    raw = envelope([SendOrder(8, 1, "noop:z"), SendOrder(9, 3, "noop:z")])
    unacked = json.dumps([json.loads(raw), "", "df.noop-3az"]).encode()
    want = {task_id(8, 1), task_id(9, 3)}
    assert task_ids([raw]) == want
    assert task_ids([unacked]) == want


def decoded(orders: list[SendOrder]):
    message = json.loads(envelope(orders))
    body = json.loads(base64.b64decode(message["body"]))
    return decode(message["headers"], body)


def test_a_device_group_reads_a_batch_as_its_dispatches() -> None:
    job = decoded([SendOrder(8, 1, "noop:z", soft_limit_s=30.0), SendOrder(9, 3, "noop:z")])
    assert job.dispatches == [(8, 1), (9, 3)]
    assert (job.job_id, job.attempt, job.soft_limit_s) == (8, 1, 30.0)
    single = decoded([SendOrder(5, 2, "noop:x")])
    assert single.dispatches == [(5, 2)]


@pytest.mark.parametrize(
    "args",
    [[[]], [[[1]]], [[[1, "2"]]], [[[1, True]]], [[[1, 2, 3]]], ["12"]],
    ids=["none", "a pair short", "a text attempt", "a bool", "a triple", "not a list"],
)
def test_a_malformed_batch_is_refused_with_a_reason(args) -> None:
    headers = {"task": TASK_RUN_JOBS, "id": "df-jobs-x"}
    with pytest.raises(BadMessage, match="df-jobs-x"):
        decode(headers, [args, {}, {}])
