"""Wrong dashboard passwords back off per client (issue 16, point 12) and per account, and no
one can lock out a user who has the right password (issue 42)."""

from __future__ import annotations

import pytest

from dashboard.login_throttle import (
    ENV_DELAY,
    MAX_ACCOUNTS,
    MAX_CLIENTS,
    MAX_DOUBLINGS,
    LoginThrottle,
)
from tests.support.clock import Clock


@pytest.fixture
def clock() -> Clock:
    return Clock(1000.0)


def throttle(clock: Clock, **kw) -> LoginThrottle:
    return LoginThrottle(clock=clock, **kw)


def test_free_attempts_then_doubling_waits(clock: Clock) -> None:
    t = throttle(clock, free_attempts=3, base_delay_s=1.0)
    waits = []
    for _ in range(6):
        waits.append(t.wait_s("a"))
        t.failed("a")
    assert waits == [0, 0, 0, 1.0, 2.0, 4.0]


def test_the_wait_runs_out(clock: Clock) -> None:
    t = throttle(clock, free_attempts=1, base_delay_s=10.0)
    t.failed("a")
    clock.now += 9.5
    assert t.wait_s("a") == pytest.approx(0.5)
    clock.now += 0.5
    assert t.wait_s("a") == 0


def test_the_wait_is_capped(clock: Clock) -> None:
    t = throttle(clock, free_attempts=0, base_delay_s=1.0, max_delay_s=300.0)
    for _ in range(200):
        t.failed("a")
    assert t.wait_s("a") == 300.0


def test_clients_are_throttled_apart(clock: Clock) -> None:
    t = throttle(clock, free_attempts=2)
    t.failed("a")
    t.failed("a")
    assert t.wait_s("a") > 0 and t.wait_s("b") == 0


def test_many_clients_at_one_account_are_slowed_after_their_first_guess(clock: Clock) -> None:
    t = throttle(clock, free_attempts=3, account_free=20, base_delay_s=1.0)
    for i in range(20):
        t.failed(f"10.0.0.{i}")  # one failure each: no client is over its own limit
    assert t.wait_s("10.0.0.3") == 1.0  # the account's back-off holds for every guesser
    t.failed("10.0.0.99")
    assert t.wait_s("10.0.0.99") == 2.0


def test_many_sources_cannot_lock_out_the_right_password(clock: Clock) -> None:
    """Issue 42: 8 addresses x 3 wrong passwords made everyone wait, up to 300 s."""
    t = throttle(clock)  # the defaults the dashboard runs with
    for _ in range(10):
        for i in range(8):
            if t.wait_s(f"10.0.0.{i}") == 0:
                t.failed(f"10.0.0.{i}")
            clock.now += 0.1
    assert all(t.wait_s(f"10.0.0.{i}") > 0 for i in range(8))
    assert t.wait_s("192.168.1.5") == 0  # the user, from an address that never failed


def test_accounts_are_throttled_apart(clock: Clock) -> None:
    t = throttle(clock, free_attempts=100, account_free=2)
    t.failed("a", "alice")
    t.failed("b", "alice")
    assert t.wait_s("a", "alice") > 0 and t.wait_s("a", "bob") == 0


def test_a_success_leaves_the_accounts_failures(clock: Clock) -> None:
    t = throttle(clock, free_attempts=100, account_free=1, base_delay_s=5.0)
    t.failed("attacker")
    t.failed("user")
    t.succeeded("user")
    assert t.wait_s("user") == 0  # its own failures are gone: it may try
    assert t.wait_s("attacker") == 10.0  # two failures at the account: one doubling


def test_accounts_remembered_are_bounded(clock: Clock) -> None:
    t = throttle(clock)
    for i in range(MAX_ACCOUNTS + 50):
        t.failed("a", f"user{i}")
    assert len(t._accounts) == MAX_ACCOUNTS


def test_failures_remembered_per_key_are_bounded(clock: Clock) -> None:
    t = throttle(clock, free_attempts=0, account_free=0, max_delay_s=1e30)
    for _ in range(1000):
        t.failed("a")
    assert len(t._clients["a"]) == len(t._accounts["*"]) == MAX_DOUBLINGS + 1
    assert t.wait_s("a") == 2.0**MAX_DOUBLINGS


def test_a_right_password_clears_its_client_only(clock: Clock) -> None:
    t = throttle(clock, free_attempts=1)
    t.failed("a")
    t.failed("b")
    t.succeeded("a")
    assert t.wait_s("a") == 0 and t.wait_s("b") > 0


def test_failures_are_forgotten_after_the_window(clock: Clock) -> None:
    t = throttle(clock, free_attempts=1, base_delay_s=1.0, window_s=60.0)
    t.failed("a")
    t.failed("a")
    clock.now += 61
    t.failed("a")
    assert t.wait_s("a") == 1.0  # one failure in the window: the first step again


def test_clients_remembered_are_bounded(clock: Clock) -> None:
    t = throttle(clock, account_free=10**9)
    for i in range(MAX_CLIENTS + 50):
        t.failed(f"c{i}")
    assert len(t._clients) == MAX_CLIENTS


@pytest.mark.parametrize(
    ("raw", "delay"),
    [("30", 30.0), ("0", 0.0), ("nan", 1.0), ("-5", 1.0), ("lots", 1.0), ("1e9", 1.0)],
)
def test_delay_from_the_environment(monkeypatch, raw: str, delay: float) -> None:
    monkeypatch.setenv(ENV_DELAY, raw)
    assert LoginThrottle.from_env().base_delay_s == delay
