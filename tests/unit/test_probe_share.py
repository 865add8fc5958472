"""Which device queues a reconciler pass reads (orchestrator/probe_share.py)."""

from __future__ import annotations

from orchestrator.probe_share import share


def test_every_queue_is_read_while_the_jobs_fit():
    assert share({"a": 8, "b": 8, "c": 8}, {}, 24) == ["a", "b", "c"]


def test_the_longest_unread_come_first_and_the_share_stops_at_the_most():
    probed_at = {"a": 3.0, "b": 1.0}  # c never read
    assert share({"a": 8, "b": 8, "c": 8}, probed_at, 16) == ["c", "b"]


def test_one_device_is_read_even_over_the_most():
    assert share({"a": 50, "b": 1}, {"b": 0.0}, 10) == ["a"]


def test_nothing_due_reads_nothing():
    assert share({}, {"a": 1.0}, 10) == []
