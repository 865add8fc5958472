"""A device group takes back what a killed consumer of its devices left unacknowledged.

kombu's Redis transport keeps a delivered, unacknowledged message in its `unacked` hash
until the visibility timeout (4 h here). When an agent dies with a message delivered to
its group and not yet claimed, the reconciler finds that message in the broker and leaves
the job dispatched: the job waited hours (found by bench/bench_fleet.py --fleet, an agent
SIGKILLed mid-campaign). The group that serves the device next puts it back on the queue.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


def deliver_and_die(broker_url: str, queue: str) -> str:
    """Receive the message waiting on `queue` as a consumer does, then drop the connection
    without acking or restoring it (a process SIGKILLed): its task id."""
    from kombu import Connection, Consumer, Exchange, Queue

    from farm_core.celery_app import transport_options

    got = []
    with Connection(broker_url, transport_options=transport_options(broker_url)) as conn:
        channel = conn.channel()
        channel.basic_qos(0, 1, False)
        q = Queue(queue, Exchange(queue), routing_key=queue)
        consumer = Consumer(channel, [q], callbacks=[lambda _b, m: got.append(m)])
        consumer.consume()
        while not got:
            conn.drain_events(timeout=10)
        channel.do_restore = False  # as the process's death: nothing goes back
    return got[0].headers["id"]


def test_a_restarted_group_runs_the_job_its_killed_predecessor_held(
    farm, start_agent, models, monkeypatch
) -> None:
    import redis

    from farm_core.celery_app import queue_for, task_id

    monkeypatch.setenv("DEVICEFARM_GROUP_DEVICES", "10")
    device = "noop:takeback?tags=takeback"
    agent = start_agent("TB", [device], farm.db_url, farm.broker_url)
    agent.kill()  # the agent and its group: SIGKILL
    sub = farm.submit(models(1), "tag=takeback", "cpu")
    job = farm.jobs(sub.campaign_id)[0]
    held = deliver_and_die(farm.broker_url, queue_for("noop:takeback"))
    assert held == task_id(job.id, job.attempt)
    unacked = redis.Redis.from_url(farm.broker_url).hvals("unacked")
    assert any(held.encode() in raw for raw in unacked), "the delivery is kept unacked"

    start_agent("TB", [device], farm.db_url, farm.broker_url)  # the same agent, again
    farm.wait_done(sub.campaign_id, timeout_s=30)  # the reconciler runs meanwhile
    (done,) = farm.jobs(sub.campaign_id)
    assert (done.state, done.attempt) == ("succeeded", 1)  # the held message ran, not a copy
    assert len(farm.results(sub.campaign_id)) == 1
