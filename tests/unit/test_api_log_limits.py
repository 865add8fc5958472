"""A log a flood cannot grow by megabytes (issue 42): repeats of one kind from one client are
summarised, other kinds and clients are not held back by them."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from tests.conftest import require_module

require_module("uvicorn", "uvicorn (the api extra)")

from api import log_limits  # noqa: E402
from api.log_limits import SUMMARY_LOGGER, RepeatSummary  # noqa: E402
from tests.support.clock import Clock  # noqa: E402


@pytest.fixture
def logged() -> Iterator[tuple[io.StringIO, RepeatSummary, Clock]]:
    """A handler behind a RepeatSummary (3 a kind per 60 s) on the test's and the
    summaries' loggers."""
    clock, out = Clock(), io.StringIO()
    summary = RepeatSummary(repeats=3, window_s=60.0, clock=clock)
    handler = logging.StreamHandler(out)
    handler.addFilter(summary)
    loggers = [logging.getLogger(n) for n in ("uvicorn.access", "api.test", SUMMARY_LOGGER)]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.INFO)
        lg.propagate = False
    yield out, summary, clock
    for lg in loggers:
        lg.removeHandler(handler)


def access(client: str, status: int) -> None:
    args = (f"{client}:5000", "GET", "/v1/campaigns", "1.1", status)
    logging.getLogger("uvicorn.access").info('%s - "%s %s HTTP/%s" %d', *args)


def test_repeats_past_the_first_few_are_held_then_summarised(logged) -> None:
    out, _, clock = logged
    for _ in range(1000):
        access("10.0.0.1", 429)
    assert out.getvalue().count("429") == 3
    clock.now += 61
    access("10.0.0.1", 429)
    lines = out.getvalue().splitlines()
    assert "… and 997 more in the last 61 s like: 10.0.0.1:5000" in lines[3], lines
    assert len(lines) == 5  # the summary, then the new window's first line


def test_other_clients_and_statuses_are_kinds_of_their_own(logged) -> None:
    out, _, _ = logged
    for _ in range(100):
        access("10.0.0.1", 429)
    access("10.0.0.2", 429)
    access("10.0.0.1", 200)
    text = out.getvalue()
    assert "10.0.0.2:5000" in text and '" 200' in text


def test_a_summary_key_and_a_message_template_make_kinds(logged) -> None:
    out, _, _ = logged
    log = logging.getLogger("api.test")
    for i in range(10):
        log.warning("closed %s", i, extra={"summary_key": ("408", "10.0.0.1")})
        log.warning("database unreachable: %s", f"error {i}")
    assert out.getvalue().count("closed") == 3 and out.getvalue().count("unreachable") == 3


def test_a_flood_that_stopped_is_summarised_by_any_later_line(logged) -> None:
    out, _, clock = logged
    for _ in range(50):
        access("10.0.0.1", 401)
    clock.now += 61
    access("10.0.0.7", 200)
    assert "… and 47 more" in out.getvalue()


def test_flush_summarises_what_is_held(logged) -> None:
    out, summary, _ = logged
    for _ in range(10):
        access("10.0.0.1", 401)
    summary.flush()
    assert "… and 7 more" in out.getvalue()


def test_kinds_remembered_are_bounded(logged, monkeypatch) -> None:
    _, summary, _ = logged
    monkeypatch.setattr(log_limits, "MAX_KINDS", 50)
    for i in range(500):
        access(f"10.0.{i // 256}.{i % 256}", 429)
    assert len(summary._windows) == 50


def test_the_servers_log_config_puts_every_handler_behind_one_filter() -> None:
    from api.serve_settings import ServeSettings

    config = log_limits.log_config(ServeSettings(log_repeats=7, log_window_s=9.0))
    assert config["filters"]["repeats"]["repeats"] == 7
    assert all(h["filters"] == ["repeats"] for h in config["handlers"].values())
    assert config["loggers"]["api"]["handlers"] == ["default"]
