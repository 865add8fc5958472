"""The compatibility page's evidence, kept (dashboard.cache): read once, again in the
background as results come in, lists decided once per thresholds (a 1,000-device farm's
lists took seconds)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.conftest import require_module

require_module("streamlit", "streamlit (the dashboard extra)")
from dashboard import cache, queries  # noqa: E402
from orchestrator.allowlist.collect import Read  # noqa: E402
from orchestrator.allowlist.rules import Thresholds  # noqa: E402
from tests.support.farm import add_device, sqlite_engine  # noqa: E402


@pytest.fixture
def farm(tmp_path: Path):
    engine = sqlite_engine(tmp_path)
    add_device(engine, "noop:a")
    calls: list[object] = []

    def read(engine, projects):
        calls.append(projects)
        return Read([], {}, {"sha": f"read #{len(calls)}"})

    yield engine, read, calls
    engine.dispose()


def test_the_evidence_is_read_once_while_it_is_unchanged(farm) -> None:
    engine, read, calls = farm
    first = cache.allowlists(engine, Thresholds(), None, read, max_age_s=0, wait=True)
    again = cache.allowlists(engine, Thresholds(), None, read, max_age_s=0, wait=True)
    assert again.kept is first.kept and again.lists is first.lists and len(calls) == 1
    other = cache.allowlists(engine, Thresholds(min_speedup=2.0), None, read, max_age_s=0)
    assert other.kept is first.kept and other.lists is not first.lists  # decided, not read
    assert other.lists["sha"].thresholds == Thresholds(min_speedup=2.0)
    mine = cache.allowlists(engine, Thresholds(), ("vision",), read)
    assert mine.kept is not first.kept and calls == [None, ("vision",)]


def test_new_evidence_is_read_again_once_the_kept_one_is_old_enough(farm) -> None:
    engine, read, calls = farm
    before = queries.evidence_version(engine)
    first = cache.allowlists(engine, Thresholds(), None, read, max_age_s=3600, wait=True)
    add_device(engine, "noop:b")  # a device registered: the version changes
    assert queries.evidence_version(engine) != before
    young = cache.allowlists(engine, Thresholds(), None, read, max_age_s=3600, wait=True)
    assert young.kept is first.kept and len(calls) == 1  # kept: read less than an hour ago
    fresh = cache.allowlists(engine, Thresholds(), None, read, max_age_s=0, wait=True)
    assert fresh.lists["sha"].model_name == "read #2" and fresh.kept.version != before


def test_the_kept_lists_are_shown_while_the_evidence_is_read_again(farm) -> None:
    engine, _, _ = farm
    started, go = threading.Event(), threading.Event()

    def slow(engine, projects):
        started.set()
        go.wait(10)
        return Read([], {}, {"sha": "new"})

    first = cache.allowlists(engine, Thresholds(), None, lambda e, p: Read([], {}, {"sha": "old"}))
    add_device(engine, "noop:b")
    shown = cache.allowlists(engine, Thresholds(), None, slow, max_age_s=0)
    assert shown.kept is first.kept and started.wait(10)  # at once, the new read under way
    go.set()
    for _ in range(100):
        now = cache.allowlists(engine, Thresholds(), None, slow, max_age_s=3600)
        if now.lists["sha"].model_name == "new":
            break
        time.sleep(0.05)
    assert now.lists["sha"].model_name == "new"


def test_a_list_file_is_made_once(farm, monkeypatch) -> None:
    engine, read, _ = farm
    made = []
    monkeypatch.setattr(cache.export, "render", lambda a, fmt: made.append(fmt) or b"x")
    decided = cache.allowlists(engine, Thresholds(min_runs=7), None, read)
    assert decided.render("sha", "csv") == decided.render("sha", "csv") == b"x"
    assert made == ["csv"]
