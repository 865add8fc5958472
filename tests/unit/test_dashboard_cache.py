"""The compatibility page's allowlists, reused while the evidence is unchanged or for a
short while (dashboard.cache): a 1,000-device farm's lists take seconds to decide."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.conftest import require_module

require_module("streamlit", "streamlit (the dashboard extra)")
from dashboard import cache, queries  # noqa: E402
from orchestrator.allowlist.rules import Thresholds  # noqa: E402
from tests.support.farm import add_device, sqlite_engine  # noqa: E402


@pytest.fixture
def farm(tmp_path: Path):
    engine = sqlite_engine(tmp_path)
    add_device(engine, "noop:a")
    calls: list[Thresholds] = []

    def decide(engine, thresholds, projects=None):
        calls.append(thresholds)
        return {"sha": f"lists #{len(calls)}"}

    yield engine, decide, calls
    engine.dispose()


def test_lists_are_decided_once_while_the_evidence_is_unchanged(farm) -> None:
    engine, decide, calls = farm
    first = cache.allowlists(engine, Thresholds(), None, decide, max_age_s=0, wait=True)
    again = cache.allowlists(engine, Thresholds(), None, decide, max_age_s=0, wait=True)
    assert again is first and len(calls) == 1
    other = cache.allowlists(engine, Thresholds(min_speedup=2.0), None, decide, max_age_s=0)
    assert other is not first and len(calls) == 2  # thresholds are part of the key
    assert cache.allowlists(engine, Thresholds(), ("vision",), decide) is not first


def test_new_evidence_is_decided_again_once_the_lists_are_old_enough(farm) -> None:
    engine, decide, calls = farm
    before = queries.evidence_version(engine)
    first = cache.allowlists(engine, Thresholds(), None, decide, max_age_s=3600, wait=True)
    add_device(engine, "noop:b")  # a device registered: the version changes
    assert queries.evidence_version(engine) != before
    young = cache.allowlists(engine, Thresholds(), None, decide, max_age_s=3600, wait=True)
    assert young is first and len(calls) == 1  # kept: decided less than an hour ago
    fresh = cache.allowlists(engine, Thresholds(), None, decide, max_age_s=0, wait=True)
    assert fresh.lists == {"sha": "lists #2"} and fresh.version != first.version


def test_the_kept_lists_are_shown_while_new_ones_are_decided(farm) -> None:
    engine, _, _ = farm
    started, go = threading.Event(), threading.Event()

    def slow(engine, thresholds, projects=None):
        started.set()
        go.wait(10)
        return {"sha": "new"}

    first = cache.allowlists(engine, Thresholds(min_runs=3), None, lambda *a, **k: {"sha": "old"})
    add_device(engine, "noop:b")
    shown = cache.allowlists(engine, Thresholds(min_runs=3), None, slow, max_age_s=0)
    assert shown is first and started.wait(10)  # at once, the new decision under way
    go.set()
    for _ in range(100):
        now = cache.allowlists(engine, Thresholds(min_runs=3), None, slow, max_age_s=3600)
        if now.lists == {"sha": "new"}:
            break
        time.sleep(0.05)
    assert now.lists == {"sha": "new"}


def test_a_list_file_is_made_once(farm, monkeypatch) -> None:
    engine, decide, _ = farm
    made = []
    monkeypatch.setattr(cache.export, "render", lambda a, fmt: made.append(fmt) or b"x")
    decided = cache.allowlists(engine, Thresholds(min_runs=7), None, decide, max_age_s=0)
    assert decided.render("sha", "csv") == decided.render("sha", "csv") == b"x"
    assert made == ["csv"]
