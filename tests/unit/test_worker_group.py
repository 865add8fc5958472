"""Device groups' parts that need no services: the job message as Celery sends it, an
exception raised in another thread's region, and the agent's group bookkeeping."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import pytest

from farm_core.celery_app import TASK_RUN_JOB
from farm_core.settings import JOB_HARD_LIMIT_S, JOB_SOFT_LIMIT_S
from worker_agent.celery_message import BadMessage, decode
from worker_agent.devices import DeviceInfo
from worker_agent.groups import DeviceGroups
from worker_agent.thread_interrupt import Interruptible


def sent_message(**send: object) -> tuple[dict, object]:
    """Headers and body of a run_job message as farm_core.dispatch sends it (read back
    from kombu's in-memory transport, one state for the whole process)."""
    from kombu import Connection, Queue

    from farm_core.celery_app import make_app

    queue = Queue("df.t", routing_key="df.t")
    with Connection("memory://") as conn:
        queue(conn.default_channel).declare()
        app = make_app("memory://")
        app.send_task(TASK_RUN_JOB, args=[7, 2], queue="df.t", declare=[], **send)
        app.close()
        message = queue(conn.default_channel).get(no_ack=True)
        assert message is not None
        return message.headers, message.decode()


def test_a_dispatched_message_decodes_to_its_job_and_limits() -> None:
    headers, body = sent_message(soft_time_limit=5, time_limit=65, countdown=3)
    job = decode(headers, body)
    assert (job.job_id, job.attempt, job.soft_limit_s, job.hard_limit_s) == (7, 2, 5.0, 65.0)
    assert job.eta is not None and 1 < (job.eta - datetime.now(UTC)).total_seconds() <= 3


def test_a_message_without_limits_gets_the_apps_defaults() -> None:
    job = decode(*sent_message())
    assert (job.soft_limit_s, job.hard_limit_s, job.eta) == (
        JOB_SOFT_LIMIT_S,
        JOB_HARD_LIMIT_S,
        None,
    )


@pytest.mark.parametrize(
    "headers, body, why",
    [
        ({"task": "other.task"}, [[1, 1], {}, {}], "unknown task"),
        ({"task": TASK_RUN_JOB}, {"args": [1, 1]}, "not \\[args"),
        ({"task": TASK_RUN_JOB}, [["1", 1], {}, {}], "not \\(job_id, attempt\\)"),
        ({"task": TASK_RUN_JOB}, [[1], {}, {}], "not \\(job_id, attempt\\)"),
        ({"task": TASK_RUN_JOB, "eta": "soon"}, [[1, 1], {}, {}], "not ISO 8601"),
    ],
)
def test_a_message_that_is_no_job_is_refused_with_a_reason(headers, body, why) -> None:
    with pytest.raises(BadMessage, match=why):
        decode(headers, body)


def test_an_interrupt_lands_inside_the_region_only() -> None:
    region, seen = Interruptible(), []
    inside = threading.Event()

    def job() -> None:
        try:
            with region.region():
                inside.set()
                for _ in range(200):  # 2 s of Python steps
                    time.sleep(0.01)
            seen.append("ran to its end")
        except TimeoutError:
            seen.append("interrupted")
        time.sleep(0.05)
        seen.append("after")

    t = threading.Thread(target=job)
    t.start()
    inside.wait(5)
    assert region.interrupt(TimeoutError)
    t.join(5)
    assert seen == ["interrupted", "after"]
    assert not region.interrupt(TimeoutError)  # no thread inside: nothing raised


class FakeProc:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.returncode: int | None = None
        self.stdin = self

    def write(self, text: str) -> None:
        self.lines.append(text.strip())

    def flush(self) -> None:
        pass

    def poll(self) -> int | None:
        return self.returncode


def test_groups_take_noop_devices_and_phones_n_to_a_process_and_pause_the_quarantined() -> None:
    spawned: list[FakeProc] = []

    def spawn(number: int) -> FakeProc:
        spawned.append(FakeProc())
        return spawned[-1]

    groups = DeviceGroups(2, spawn)  # type: ignore[arg-type]
    devices = {f"noop:{n}": DeviceInfo(f"noop:{n}", "noop") for n in "abc"}
    assert not groups.takes(DeviceInfo("opencl:x", "opencl"))
    assert not DeviceGroups(0, spawn).takes(devices["noop:a"])  # type: ignore[arg-type]
    groups.keep(devices, print)
    assert len(spawned) == 2  # a and b, then c
    assert [line.split(" ", 1)[0] for line in spawned[0].lines] == ["serve", "serve"]
    groups.keep({k: d for k, d in devices.items() if k != "noop:b"}, print)
    assert spawned[0].lines[-1] == "pause noop:b"
    groups.keep(devices, print)
    assert spawned[0].lines[-1].startswith('serve {"key": "noop:b"')
    spawned[1].returncode = 1  # c's group exits: restarted after the delay, c served again
    groups.groups[1].exited_at = time.monotonic() - 10
    groups.keep(devices, print)
    assert len(spawned) == 3 and spawned[2].lines[0].startswith('serve {"key": "noop:c"')


class FakeMessage:
    def __init__(self) -> None:
        self.acks = 0
        self.delivery_tag = "t1"
        self.channel = None

    def ack(self) -> None:
        self.acks += 1


def test_a_job_past_its_hard_limit_is_given_up_and_its_device_waits_for_its_thread(
    tmp_path,
) -> None:
    """The hard limit acks the message and stops the lease at once; the device starts
    nothing until the thread really ends, and its message is not acked twice."""
    from worker_agent.celery_message import JobMessage
    from worker_agent.group import DeviceGroup, Running, Slot

    group = DeviceGroup(f"sqlite:///{tmp_path / 'farm.db'}", "memory://")
    group.serve(DeviceInfo("noop:h", "noop"))
    slot: Slot = group.slots["noop:h"]
    release = threading.Event()
    stuck = threading.Thread(target=release.wait, daemon=True)
    stuck.start()
    message = FakeMessage()
    job = JobMessage(1, 1, "df-job-1-1", soft_limit_s=100.0, hard_limit_s=0.1)
    slot.running = Running(message, job, time.monotonic() - 1, stuck)
    slot.ctx.lease.hold(1, 1)
    group._limits()
    assert slot.running.given_up and message.acks == 1
    assert slot.ctx.lease._current is None  # no longer renewed: the reconciler moves it
    group._reap()
    assert slot.running is not None  # the thread still runs: the device stays busy
    release.set()
    stuck.join(5)
    group._reap()
    assert slot.running is None and message.acks == 1
    group._close()
