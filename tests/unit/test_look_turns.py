"""A reconciler pass looks for lost messages and stalls on a share of a large fleet's
devices, in turn (orchestrator.look_turns), and keeps what it did not look at."""

from __future__ import annotations

from datetime import datetime, timedelta
from types import SimpleNamespace

from farm_core.celery_app import task_id
from orchestrator.look_turns import devices_to_look_at
from orchestrator.lost_messages import confirmed

NOW = datetime(2026, 12, 7, 12, 0, 0)


def turns_probe() -> SimpleNamespace:
    return SimpleNamespace(looked_at={}, missing_since={})


def test_a_farm_no_larger_than_a_pass_is_looked_at_whole() -> None:
    probe = turns_probe()
    assert devices_to_look_at(probe, ["a", "b"], 2, NOW) is None
    assert devices_to_look_at(lambda queues=None: set(), ["a", "b", "c"], 2, NOW) is None


def test_a_larger_fleet_is_looked_at_in_turn_longest_ago_first() -> None:
    probe, live = turns_probe(), ["a", "b", "c", "d", "e"]
    seen = [devices_to_look_at(probe, live, 2, NOW + timedelta(seconds=s)) for s in range(3)]
    assert seen == [["a", "b"], ["c", "d"], ["e", "a"]]
    devices_to_look_at(probe, ["a", "b", "c"], 2, NOW + timedelta(seconds=3))
    assert set(probe.looked_at) == {"a", "b", "c"}  # devices no longer live forgotten


def _job(job_id: int, device: str) -> SimpleNamespace:
    return SimpleNamespace(id=job_id, attempt=1, device_key=device)


def test_a_miss_on_a_device_not_looked_at_is_kept_for_its_turn() -> None:
    probe = turns_probe()
    confirmed(probe, [_job(1, "a"), _job(2, "b")], NOW, 60.0, looked=["a", "b"])
    later = NOW + timedelta(seconds=61)
    # a pass that looked at b only: a's miss stays, b's job 2 was found (no candidate)
    assert confirmed(probe, [], later, 60.0, looked=["b"]) == []
    assert set(probe.missing_since) == {task_id(1, 1)}
    job = _job(1, "a")
    assert confirmed(probe, [job], later, 60.0, looked=["a"]) == [job]  # missed 61 s
    # kept no longer than ten confirmations
    assert confirmed(probe, [], later + timedelta(seconds=600), 60.0, looked=["b"]) == []
    assert probe.missing_since == {}
