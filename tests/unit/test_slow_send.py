"""A long send marks its later parts dispatched again when they leave, so that the
reconciler (a message is lost when the broker lacks it past the dispatch grace from that
mark) does not take messages still being sent for lost (farm_core.device_queue._send): a 10,000-job submission
on a loaded host took 59 s to send, and 4,916 unsent messages were re-placed as lost."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from farm_core import device_queue
from farm_core.dispatch import SendOrder
from farm_core.schema import Job
from orchestrator.submit import submit
from tests.support.farm import RecordingDispatcher, add_device, sqlite_engine, write_model


class SlowDispatcher(RecordingDispatcher):
    """Sends each part `pause_s` after the one before, as a busy host's broker does."""

    def __init__(self, pause_s: float) -> None:
        super().__init__()
        self.pause_s = pause_s
        self.parts: list[int] = []

    def send(
        self, orders: Sequence[SendOrder], per_message: int = 1
    ) -> tuple[list[SendOrder], str]:
        time.sleep(self.pause_s)
        self.parts.append(len(orders))
        return super().send(orders, per_message)


@pytest.mark.parametrize("restamp_after_s, later_parts_stamped", [(0.05, True), (60.0, False)])
def test_later_parts_of_a_slow_send_are_stamped_when_they_leave(
    tmp_path: Path, monkeypatch, restamp_after_s: float, later_parts_stamped: bool
) -> None:
    monkeypatch.setattr(device_queue, "SEND_BATCH", 2)
    monkeypatch.setattr(device_queue, "RESTAMP_AFTER_S", restamp_after_s)
    monkeypatch.setenv(device_queue.ENV_QUEUE_DEPTH, "6")
    engine = sqlite_engine(tmp_path)
    add_device(engine, "noop:a")
    models = [write_model(tmp_path / f"m{i}.tflite", 1.0 + i) for i in range(6)]
    slow = SlowDispatcher(pause_s=0.2)
    submit(engine, slow, models, "key=noop:a", "cpu")
    assert slow.parts == [2, 2, 2]
    with engine.begin() as c:
        stamps = [s for (s,) in c.execute(select(Job.dispatched_at).order_by(Job.id))]
    first, last = stamps[0], stamps[-1]
    assert (last - first >= timedelta(seconds=0.3)) == later_parts_stamped, stamps
