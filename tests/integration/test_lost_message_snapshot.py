"""A message is lost only when a snapshot of its queue and the unacked hash lacks it too
(orchestrator/probes.py RedisProbe.recheck), on a real Redis: the full probe scans for the
queues' lists and then reads them and the hash, so a message whose list was empty at the
scan and which is taken back from the hash to its list before the read (as consumers do
after a Redis restart) is in neither read. And only once the broker has lacked it for
`lost_confirm_s`: Redis pops a message as it answers a consumer's BRPOP, and a busy
consumer reads the reply seconds later (in a 1,000-device fleet, 758 of 865 messages
called lost arrived later, refused as stale)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import redis

from farm_core import jobs
from farm_core.celery_app import queue_for
from farm_core.dispatch import SendOrder
from farm_core.redis_publish import RedisPublisher
from farm_core.schema import utcnow
from farm_core.settings import Timing
from orchestrator.probes import REDIS_UNACKED_KEY, RedisProbe, priority_lists
from orchestrator.reconciler import reconcile
from orchestrator.submit import submit
from tests.support.farm import RecordingDispatcher, add_device, sqlite_engine, write_model

TIMING = Timing(dispatch_grace_s=0, offline_after_s=30, device_gone_s=300, lost_confirm_s=0)


def _farm(tmp_path: Path):
    engine = sqlite_engine(tmp_path)
    add_device(engine, "noop:a")
    submit(engine, RecordingDispatcher(), [write_model(tmp_path / "m.tflite")], "key=noop:a", "cpu")
    return engine  # job 1, attempt 1, dispatched; its message is put in Redis below


def _delivered(client: redis.Redis, task: str) -> None:
    """The job's message as kombu keeps a delivered one: in the unacked hash."""
    body = json.dumps([{"headers": {"id": task}, "body": ""}, "", queue_for("noop:a")])
    client.hset(REDIS_UNACKED_KEY, "tag-1", body)


def _taken_back_during_the_scan(probe: RedisProbe) -> None:
    """After the full probe's scan (its list empty, so not found) and before its read,
    the message moves from the hash back to its list."""
    client, scan_iter = probe.client, probe.client.scan_iter

    def scanned_then_moved(*args, **kwargs):  # type: ignore[no-untyped-def]
        keys = list(scan_iter(*args, **kwargs))
        message, _, _ = json.loads(client.hget(REDIS_UNACKED_KEY, "tag-1"))
        client.lpush(queue_for("noop:a"), json.dumps(message))
        client.hdel(REDIS_UNACKED_KEY, "tag-1")
        return iter(keys)

    client.scan_iter = scanned_then_moved  # type: ignore[method-assign]


def test_a_message_moved_during_the_scan_is_not_called_lost(tmp_path, redis_url):
    engine = _farm(tmp_path)
    probe = RedisProbe(redis_url)
    probe.client.flushdb()
    _delivered(probe.client, "df-job-1-1")
    _taken_back_during_the_scan(probe)
    assert "df-job-1-1" not in probe()  # the full probe alone misses it
    _delivered(probe.client, "df-job-1-1")  # as before the scan
    probe.client.delete(queue_for("noop:a"))
    report = reconcile(
        engine, RecordingDispatcher(), probe, TIMING, now=utcnow() + timedelta(seconds=1)
    )
    assert report.resent_lost_message == [] and report.probed == 1
    assert probe.client.lrange(queue_for("noop:a"), 0, -1)  # where the snapshot saw it


def test_a_message_in_neither_read_is_lost(tmp_path, redis_url):
    engine = _farm(tmp_path)
    probe = RedisProbe(redis_url)
    probe.client.flushdb()
    d = RecordingDispatcher()
    report = reconcile(engine, d, probe, TIMING, now=utcnow() + timedelta(seconds=1))
    assert report.resent_lost_message == [1]
    assert [(o.device_key, o.attempt) for o in d.sent] == [("noop:a", 2)]


def test_the_snapshot_reads_every_priority_list(redis_url):
    probe = RedisProbe(redis_url)
    names = priority_lists(queue_for("noop:a"))
    for i, name in enumerate(names):
        probe.client.lpush(name, json.dumps({"headers": {"id": f"t{i}"}}))
    assert probe.recheck([queue_for("noop:a")]) == {f"t{i}" for i in range(len(names))}
    assert probe() == probe.recheck([queue_for("noop:a")])  # the full probe's scan agrees
    assert probe([queue_for("noop:a")]) == probe()
    assert probe([queue_for("noop:b")]) == set()  # only the lists of the queues asked for


def test_the_full_probe_passes_over_a_key_of_the_prefix_that_is_no_list(redis_url):
    probe = RedisProbe(redis_url)
    probe.client.flushdb()
    probe.client.set(queue_for("noop:b"), "not a queue")  # WRONGTYPE inside the transaction
    probe.client.lpush(queue_for("noop:a"), json.dumps({"headers": {"id": "t1"}}))
    _delivered(probe.client, "t2")
    assert probe() == {"t1", "t2"}


def test_ids_the_pattern_cannot_find_are_read_from_the_whole_message(redis_url):
    probe = RedisProbe(redis_url)
    probe.client.flushdb()
    queue = queue_for("noop:a")
    nested = {"headers": {"stamps": {"id": "not-it"}, "id": "t-nested"}}  # a brace first
    probe.client.lpush(queue, json.dumps(nested), json.dumps({"headers": {"id": 'a"b'}}))
    probe.client.lpush(queue, json.dumps({"headers": {"id": "t-plain"}}), "not json at all")
    assert probe() == {"t-nested", 'a"b', "t-plain"}


CONFIRM = Timing(dispatch_grace_s=0, offline_after_s=300, device_gone_s=900, lost_confirm_s=20)


def _pass(engine, probe, seconds: float):  # type: ignore[no-untyped-def]
    now = utcnow() + timedelta(seconds=seconds)
    return reconcile(engine, RecordingDispatcher(), probe, CONFIRM, now=now)


def test_a_message_is_lost_once_the_broker_lacked_it_for_the_confirmation(tmp_path, redis_url):
    engine = _farm(tmp_path)
    probe = RedisProbe(redis_url)
    probe.client.flushdb()
    assert _pass(engine, probe, 1).resent_lost_message == []  # first missed now
    assert _pass(engine, probe, 20).resent_lost_message == []  # 19 s
    assert _pass(engine, probe, 21).resent_lost_message == [1]  # 20 s


def test_a_message_found_again_starts_the_confirmation_over(tmp_path, redis_url):
    engine = _farm(tmp_path)
    probe = RedisProbe(redis_url)
    probe.client.flushdb()
    assert _pass(engine, probe, 1).resent_lost_message == []
    _delivered(probe.client, "df-job-1-1")
    assert _pass(engine, probe, 15).resent_lost_message == []  # seen: forgotten
    probe.client.delete(REDIS_UNACKED_KEY)
    assert _pass(engine, probe, 30).resent_lost_message == []  # missed again from here
    assert _pass(engine, probe, 50).resent_lost_message == [1]


def test_a_message_popped_for_a_consumer_that_reads_it_late_is_not_lost(tmp_path, redis_url):
    from celery import Celery

    engine = _farm(tmp_path)
    probe = RedisProbe(redis_url)
    probe.client.flushdb()
    publisher = RedisPublisher(Celery(set_as_current=False), redis_url)
    name, _ = publisher.message([SendOrder(1, 1, "noop:a")])
    publisher.publish([[SendOrder(1, 1, "noop:a")]])
    consumer = probe.client.connection_pool.get_connection()
    consumer.send_command("BRPOP", name, 30)  # Redis pops it as it answers; not read yet
    assert probe.client.llen(name) == 0  # in no list, not in unacked: only in the socket
    assert _pass(engine, probe, 1).resent_lost_message == []
    _, message = consumer.read_response()  # the consumer reads it, late, and claims
    assert b"df-job-1-1" in message
    with engine.begin() as conn:
        assert jobs.claim(conn, 1, 1, "late-consumer", 60) is not None
    assert _pass(engine, probe, 30).resent_lost_message == []


def test_the_broker_s_replies_are_parsed_with_hiredis() -> None:
    """The farm's install brings hiredis (`redis[hiredis]`), which redis-py uses for every
    reply where it is installed: the full probe over 1,000 queues and 8,000 messages took
    47-48 ms parsing in Python, 29-31 with it (docs/benchmarks.md)."""
    from redis.connection import DefaultParser
    from redis.utils import HIREDIS_AVAILABLE

    assert HIREDIS_AVAILABLE and "Hiredis" in DefaultParser.__name__
