"""A device group against a Redis that breaks (issue 44, found by bench/bench_fleet.py
--fleet): a delivery recorded as the connection broke, an idle group's polling, a shutdown
with Redis no longer answering.

Each test has a redis-server of its own. The jobs are retries waiting for their eta (an
hour away), so a group holds them received and never starts them: no database needed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.farm import RedisServer, free_port, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def redis_server(tmp_path):
    server = RedisServer(free_port(), tmp_path)
    server.start()
    yield server
    if server.proc is not None:
        os.kill(server.proc.pid, signal.SIGCONT)  # one a test froze
    server.stop()


def send_later_job(broker_url: str, key: str, job_id: int) -> str:
    """A run_job retry for `key`'s queue, due in an hour: its task id."""
    from farm_core.celery_app import TASK_RUN_JOB, make_app, queue_for

    app = make_app(broker_url)
    try:
        sent = app.send_task(
            TASK_RUN_JOB, args=[job_id, 1], queue=queue_for(key), declare=[], countdown=3600
        )
    finally:
        app.close()
    return sent.id


def broker_view(broker_url: str, key: str) -> tuple[int, int]:
    """(messages on `key`'s queue, deliveries in the unacked hash)."""
    import redis

    from farm_core.celery_app import queue_for

    r = redis.Redis.from_url(broker_url)
    waiting = sum(r.llen(k) for k in r.keys(queue_for(key) + "*") if r.type(k) == b"list")
    return waiting, r.hlen("unacked")


def in_process_group(tmp_path: Path, broker_url: str, key: str):
    """A DeviceGroup serving `key`, its loop on a thread, once it consumes."""
    from worker_agent.devices import DeviceInfo
    from worker_agent.group import DeviceGroup

    group = DeviceGroup(f"sqlite:///{tmp_path / 'farm.db'}", broker_url)
    group.serve(DeviceInfo(key, "noop"))
    loop = threading.Thread(target=group.run, name="group", daemon=True)
    loop.start()
    wait_until(lambda: group.slots[key].consumer is not None, 10, "the group to consume")
    return group, loop


def test_a_delivery_recorded_as_the_connection_broke_is_put_back_once(
    tmp_path, redis_server, monkeypatch
) -> None:
    """kombu records a delivery in Redis's unacked hash before its consumer sees it; Redis
    killed after storing the record and before its reply (persistent, fsync always) leaves
    a delivery no one runs, and the reconciler, finding it in the broker, leaves its job
    (the fleet bench's job 8988). Injected here at that point: the group, reconnected,
    puts it back and receives it; a second reconnection puts back nothing it holds."""
    import redis
    from kombu.transport.redis import QoS

    real_append, broke = QoS.append, []

    def append_then_break(self, message, delivery_tag):
        real_append(self, message, delivery_tag)  # Redis stored the record...
        if not broke:
            broke.append(delivery_tag)
            self._delivered.pop(delivery_tag, None)  # ...and its reply never came
            raise redis.exceptions.ConnectionError("reply lost (injected)")

    monkeypatch.setattr(QoS, "append", append_then_break)
    key = "noop:brk"
    group, loop = in_process_group(tmp_path, redis_server.url, key)
    lost = []
    real_lost = group._lost
    monkeypatch.setattr(group, "_lost", lambda exc: (lost.append(exc), real_lost(exc)))
    slot = group.slots[key]
    try:
        task = send_later_job(redis_server.url, key, 8988)
        wait_until(lambda: broke and lost, 10, "the injected break")
        wait_until(lambda: slot.held, 15, "the delivery to be put back and received")
        assert [job.task_id for _, _, job in slot.held] == [task]
        assert broker_view(redis_server.url, key) == (0, 1)

        # the connection breaks again: what the group holds stays with it, not doubled
        r = redis.Redis.from_url(redis_server.url)
        r.client_kill_filter(_type="normal", skipme=True)
        wait_until(lambda: len(lost) >= 2, 15, "the group to lose its connection")
        wait_until(lambda: slot.consumer is not None, 15, "the group to consume again")
        time.sleep(1.0)  # a message put back would be received within this
        assert [job.task_id for _, _, job in slot.held] == [task]
        assert broker_view(redis_server.url, key) == (0, 1)
    finally:
        group.stopping.set()
        loop.join(30)
    assert not loop.is_alive()
    assert broker_view(redis_server.url, key) == (1, 0)  # the close put it back


def start_group(tmp_path: Path, broker_url: str, keys: list[str]) -> tuple[subprocess.Popen, Path]:
    """`python -m worker_agent.group` serving `keys`; its log."""
    log = tmp_path / "group.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "worker_agent.group", "--db", f"sqlite:///{tmp_path / 'f.db'}"]
        + ["--broker", broker_url, "--loglevel", "INFO"],
        stdin=subprocess.PIPE,
        stderr=log.open("w"),
        text=True,
        start_new_session=True,
    )
    assert proc.stdin is not None
    for key in keys:
        proc.stdin.write("serve " + json.dumps({"key": key, "kind": "noop"}) + "\n")
    proc.stdin.flush()
    wait_until(lambda: log.read_text().count(" ready.") == len(keys), 60, "every device to consume")
    return proc, log


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_an_idle_group_of_100_devices_neither_polls_nor_spins(tmp_path, redis_server) -> None:
    """At kombu's 1 s BRPOP each device's wait came back every second and each reply made
    kombu walk all 100 channels: ~12 % of a core for an idle group. Now a device's BRPOP
    waits BRPOP_WAIT_S; its messages still arrive at once (test_device_group.py)."""
    import redis

    r = redis.Redis.from_url(redis_server.url)
    proc, _ = start_group(tmp_path, redis_server.url, [f"noop:idle{i:03d}" for i in range(100)])
    try:
        time.sleep(1.0)
        brpop = lambda: r.info("commandstats").get("cmdstat_brpop", {}).get("calls", 0)  # noqa: E731
        calls, cpu, t = brpop(), cpu_s(proc.pid), time.monotonic()
        time.sleep(10.0)
        took = time.monotonic() - t
        per_device_s = (brpop() - calls) / 100 / took
        share = (cpu_s(proc.pid) - cpu) / took
    finally:
        proc.terminate()
        proc.wait(30)
    assert per_device_s < 0.15, f"{per_device_s:.2f} BRPOPs a second per idle device"
    assert share < 0.04, f"an idle group of 100 devices took {share:.1%} of a core"


@pytest.mark.parametrize("fault", ["frozen", "killed"])
def test_a_group_stops_within_a_bound_when_redis_is_gone(tmp_path, redis_server, fault) -> None:
    """SIGTERM with received messages to put back and Redis no longer answering (frozen:
    SIGSTOP, as a host gone from the network) or gone (killed): the group exits within
    a bound (a command's socket timeout, then the close's deadline); frozen, it hung in
    kombu's restore for ever, deaf to further SIGTERMs."""
    from worker_agent.group import CLOSE_DEADLINE_S, SOCKET_TIMEOUT_S

    bound = SOCKET_TIMEOUT_S + CLOSE_DEADLINE_S + 5

    keys = [f"noop:stop{i}" for i in range(5)]
    proc, log = start_group(tmp_path, redis_server.url, keys)
    try:
        for i, key in enumerate(keys):
            send_later_job(redis_server.url, key, i + 1)
        wait_until(lambda: broker_view(redis_server.url, keys[0])[1] == 5, 10, "deliveries")
        if fault == "frozen":
            assert redis_server.proc is not None
            os.kill(redis_server.proc.pid, signal.SIGSTOP)
            proc.terminate()
        else:
            proc.terminate()  # the stop asked first: the group may not see Redis go
            redis_server.stop()
        started = time.monotonic()
        proc.wait(bound + 5)
        assert time.monotonic() - started < bound, log.read_text()[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
