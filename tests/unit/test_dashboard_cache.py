"""The compatibility page's evidence, kept per model (dashboard.cache): read once, again in
the background as results come in, lists decided once per thresholds (a 1,000-device farm's
lists took seconds), only the models asked for read."""

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
    calls: list[tuple[object, list[str]]] = []

    def read(engine, projects, models):
        calls.append((projects, list(models)))
        return Read([], {}, {m: f"{m} read #{len(calls)}" for m in models})

    yield engine, read, calls
    cache.forget()
    engine.dispose()


def test_the_evidence_is_read_once_while_it_is_unchanged(farm) -> None:
    engine, read, calls = farm
    first = cache.allowlists(engine, Thresholds(), None, ["sha"], read, max_age_s=0, wait=True)
    again = cache.allowlists(engine, Thresholds(), None, ["sha"], read, max_age_s=0, wait=True)
    assert again.kept == first.kept and again.lists == first.lists and len(calls) == 1
    assert again.kept["sha"] is first.kept["sha"] and again.lists["sha"] is first.lists["sha"]
    other = cache.allowlists(engine, Thresholds(min_speedup=2.0), None, ["sha"], read, max_age_s=0)
    assert other.kept["sha"] is first.kept["sha"]  # decided again, not read
    assert other.lists["sha"].thresholds == Thresholds(min_speedup=2.0)
    mine = cache.allowlists(engine, Thresholds(), ("vision",), ["sha"], read)
    assert mine.kept["sha"] is not first.kept["sha"]
    assert calls == [(None, ["sha"]), (("vision",), ["sha"])]


def test_only_the_models_not_kept_are_read_and_in_the_order_asked(farm) -> None:
    engine, read, calls = farm
    cache.allowlists(engine, Thresholds(), None, ["b"], read)
    both = cache.allowlists(engine, Thresholds(), None, ["c", "b", "a"], read)
    assert calls == [(None, ["b"]), (None, ["c", "a"])]  # one read for the two not kept
    assert list(both.lists) == ["c", "b", "a"]
    assert both.lists["b"].model_name == "b read #1" and both.lists["a"].model_name == "a read #2"


def test_a_model_not_found_is_left_out(farm) -> None:
    engine, _, _ = farm

    def read(engine, projects, models):  # a model no longer stored: not in what is read
        return Read([], {}, {m: m for m in models if m != "gone"})

    decided = cache.allowlists(engine, Thresholds(), None, ["gone", "here"], read)
    assert list(decided.lists) == ["here"]


def test_new_evidence_is_read_again_once_the_kept_one_is_old_enough(farm) -> None:
    engine, read, calls = farm
    before = queries.evidence_versions(engine, ["sha"])
    first = cache.allowlists(engine, Thresholds(), None, ["sha"], read, max_age_s=3600, wait=True)
    add_device(engine, "noop:b")  # a device registered: the version changes
    assert queries.evidence_versions(engine, ["sha"]) != before
    young = cache.allowlists(engine, Thresholds(), None, ["sha"], read, max_age_s=3600, wait=True)
    assert young.kept["sha"] is first.kept["sha"] and len(calls) == 1  # read under an hour ago
    fresh = cache.allowlists(engine, Thresholds(), None, ["sha"], read, max_age_s=0, wait=True)
    assert fresh.lists["sha"].model_name == "sha read #2"
    assert fresh.kept["sha"].version != before["sha"]


def test_the_kept_lists_are_shown_while_the_evidence_is_read_again(farm) -> None:
    engine, _, _ = farm
    started, go = threading.Event(), threading.Event()

    def slow(engine, projects, models):
        started.set()
        go.wait(10)
        return Read([], {}, {"sha": "new"})

    def old(engine, projects, models):
        return Read([], {}, {"sha": "old"})

    first = cache.allowlists(engine, Thresholds(), None, ["sha"], old)
    add_device(engine, "noop:b")
    shown = cache.allowlists(engine, Thresholds(), None, ["sha"], slow, max_age_s=0)
    assert shown.kept["sha"] is first.kept["sha"] and started.wait(10)  # the new read under way
    go.set()
    for _ in range(100):
        now = cache.allowlists(engine, Thresholds(), None, ["sha"], slow, max_age_s=3600)
        if now.lists["sha"].model_name == "new":
            break
        time.sleep(0.05)
    assert now.lists["sha"].model_name == "new"


def test_a_list_file_is_made_once(farm, monkeypatch) -> None:
    engine, read, _ = farm
    made = []
    monkeypatch.setattr(cache.export, "render", lambda a, fmt: made.append(fmt) or b"x")
    decided = cache.allowlists(engine, Thresholds(min_runs=7), None, ["sha"], read)
    assert decided.render("sha", "csv") == decided.render("sha", "csv") == b"x"
    again = cache.allowlists(engine, Thresholds(min_runs=7), None, ["sha"], read)
    assert again.render("sha", "csv") == b"x" and made == ["csv"]


def test_kept_models_are_bounded(farm, monkeypatch) -> None:
    engine, read, calls = farm
    monkeypatch.setattr(cache, "KEPT", 2)
    first = cache.allowlists(engine, Thresholds(), None, ["a", "b", "c"], read)
    cache.allowlists(engine, Thresholds(), None, ["b", "c"], read)
    assert len(cache._kept) == 2
    again = cache.allowlists(engine, Thresholds(), None, ["a"], read)  # the least recently used
    assert again.kept["a"] is not first.kept["a"]  # gone from the process: its stored row read
    assert again.lists["a"] == first.lists["a"] and len(calls) == 1 and len(cache._kept) == 2
