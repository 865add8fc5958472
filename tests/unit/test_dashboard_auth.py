"""The dashboard's logins (dashboard/auth.py): users of the farm's tokens file with their
API roles, the shared password, and the signed session cookie."""

from __future__ import annotations

from pathlib import Path

import pytest

from dashboard.auth import PASSWORD_USER, Gate
from farm_core.accounts import Accounts, save_accounts
from tests.support.clock import Clock


@pytest.fixture
def tokens(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    accounts, reader = Accounts().add("rita", "read")
    accounts, submitter = accounts.add("sam", "submit")
    path = tmp_path / "tokens.json"
    save_accounts(accounts, path)
    return path, {"rita": reader, "sam": submitter}


def gate(path: Path | None, password: str | None = None, clock=None) -> Gate:
    return Gate(path, password, b"k" * 32, session_s=60, clock=clock or Clock(1_000_000.0))


def test_no_tokens_and_no_password_means_no_login() -> None:
    assert not gate(None).enabled


def test_a_token_logs_in_with_its_role(tokens) -> None:
    path, tok = tokens
    g = gate(path)
    rita, sam = g.check(tok["rita"]), g.check(tok["sam"])
    assert (rita.name, rita.role, rita.can_write) == ("rita", "read", False)
    assert (sam.name, sam.role, sam.can_write) == ("sam", "submit", True)


def test_a_wrong_secret_logs_nobody_in(tokens) -> None:
    path, tok = tokens
    assert gate(path, "pw").check(tok["rita"] + "x") is None
    assert gate(path, "pw").check("") is None


def test_the_shared_password_is_a_submit_user(tokens) -> None:
    who = gate(tokens[0], "pw").check("pw")
    assert (who.name, who.role) == (PASSWORD_USER, "submit")


def test_a_cookie_round_trips(tokens) -> None:
    path, tok = tokens
    g = gate(path)
    assert g.verify(g.issue(g.check(tok["rita"]))) == g.check(tok["rita"])


def test_a_tampered_cookie_is_refused(tokens) -> None:
    path, tok = tokens
    g = gate(path)
    cookie = g.issue(g.check(tok["rita"]))
    name, fp, expiry, mac = cookie.split(".")
    assert g.verify(f"{name}.{fp}.{int(expiry) + 3600}.{mac}") is None
    assert g.verify(cookie[:-1] + ("A" if cookie[-1] != "A" else "B")) is None
    assert g.verify("garbage") is None and g.verify(None) is None


def test_another_key_refuses_the_cookie(tokens) -> None:
    path, tok = tokens
    g = gate(path)
    other = Gate(path, None, b"x" * 32)
    assert other.verify(g.issue(g.check(tok["rita"]))) is None


def test_a_cookie_expires(tokens) -> None:
    path, tok = tokens
    clock = Clock(1_000_000.0)
    g = gate(path, clock=clock)
    cookie = g.issue(g.check(tok["sam"]))
    clock.now += 61
    assert g.verify(cookie) is None


def test_a_removed_user_is_logged_out(tokens) -> None:
    path, tok = tokens
    g = gate(path)
    cookie = g.issue(g.check(tok["sam"]))
    accounts = Accounts(tuple(u for u in g.accounts() if u.name != "sam"))
    save_accounts(accounts, path)
    assert g.verify(cookie) is None


def test_a_revoked_token_ends_its_sessions_and_only_those(tokens) -> None:
    """Several tokens per user (issue 42): a new token leaves the old one's sessions; a
    revoked token ends them."""
    path, tok = tokens
    g = gate(path)
    cookie = g.issue(g.check(tok["sam"]))
    accounts, _, other = g.accounts().add_token("sam")
    save_accounts(accounts, path)
    assert g.verify(cookie) is not None
    other_cookie = g.issue(g.check(other))
    accounts, _ = accounts.revoke(g.accounts().authenticate(tok["sam"]).token.id)
    save_accounts(accounts, path)
    assert g.verify(cookie) is None and g.verify(other_cookie) is not None


def test_a_changed_role_applies_to_open_sessions(tokens) -> None:
    path, tok = tokens
    g = gate(path)
    cookie = g.issue(g.check(tok["sam"]))
    save_accounts(g.accounts().set_user("sam", projects={"default": "read"}), path)
    assert g.verify(cookie).role == "read"


def test_a_new_password_ends_the_password_sessions() -> None:
    g = gate(None, "old")
    cookie = g.issue(g.check("old"))
    assert g.verify(cookie) is not None
    assert gate(None, "new").verify(cookie) is None
