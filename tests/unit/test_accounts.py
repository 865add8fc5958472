"""farm_core/accounts.py: the tokens file shared by the API and the dashboard."""

from __future__ import annotations

import hashlib
import json
import stat
from pathlib import Path

import pytest

from farm_core.accounts import (
    Accounts,
    AccountsError,
    load_accounts,
    parse_accounts,
    save_accounts,
)


def test_a_new_token_authenticates_its_user_and_no_other_token_does() -> None:
    accounts, token = Accounts().add("alice", "submit")
    user = accounts.authenticate(token)
    assert user is not None and (user.name, user.role) == ("alice", "submit")
    assert accounts.authenticate(token + "x") is None
    assert accounts.authenticate("") is None
    assert accounts.authenticate(None) is None


def test_the_file_holds_the_sha256_of_the_token_never_the_token(tmp_path: Path) -> None:
    accounts, token = Accounts().add("alice", "admin")
    path = tmp_path / "tokens.json"
    save_accounts(accounts, path)
    text = path.read_text()
    assert token not in text
    assert (
        json.loads(text)["users"][0]["tokens"][0]["sha256"]
        == hashlib.sha256(token.encode()).hexdigest()
    )


def test_the_saved_file_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    save_accounts(Accounts().add("alice", "read")[0], path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_saved_file_loads_back_with_the_same_users(tmp_path: Path) -> None:
    accounts, t1 = Accounts().add("alice", "admin")
    accounts, t2 = accounts.add("bob", "read")
    path = tmp_path / "tokens.json"
    save_accounts(accounts, path)
    loaded = load_accounts(path)
    assert loaded == accounts
    assert loaded.authenticate(t2).name == "bob"


@pytest.mark.parametrize(
    ("role", "can_write"), [("admin", True), ("submit", True), ("read", False)]
)
def test_only_admin_and_submit_roles_can_write(role: str, can_write: bool) -> None:
    accounts, token = Accounts().add("u", role)
    assert accounts.authenticate(token).can_write is can_write


def test_adding_an_existing_user_changes_their_role_and_keeps_their_other_tokens() -> None:
    """Several tokens per user (issue 42): a new one does not end the old; revoking does."""
    accounts, old = Accounts().add("alice", "read")
    accounts, new = accounts.add("alice", "submit")
    assert len(accounts) == 1
    assert accounts.authenticate(new).role == "submit"
    assert accounts.authenticate(old).role == "read"  # its scope: what it was made with
    accounts, _ = accounts.revoke(accounts.authenticate(old).token.id)
    assert accounts.authenticate(old) is None and accounts.authenticate(new) is not None


def test_two_tokens_made_for_the_same_user_differ() -> None:
    assert Accounts().add("a", "read")[1] != Accounts().add("a", "read")[1]


@pytest.mark.parametrize("name", ["", "../etc", "a b", "-x", "x" * 65, "é"])
def test_a_bad_user_name_is_refused(name: str) -> None:
    with pytest.raises(AccountsError, match="bad user name"):
        Accounts().add(name, "read")


def test_an_unknown_role_is_refused() -> None:
    with pytest.raises(AccountsError, match="bad role"):
        Accounts().add("alice", "root")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "not JSON"),
        ("[]", "expected"),
        ('{"users": [1]}', "not an object"),
        ('{"users": [{"name": "a", "role": "read", "token_sha256": "abc"}]}', "64 hex"),
        ('{"users": [{"name": "a", "role": "god", "token_sha256": "' + "0" * 64 + '"}]}', "role"),
        (
            '{"users": [{"name": "a", "role": "read", "token_sha256": "'
            + "0" * 64
            + '"}, {"name": "a", "role": "read", "token_sha256": "'
            + "1" * 64
            + '"}]}',
            "twice",
        ),
    ],
)
def test_a_malformed_tokens_file_is_refused_with_a_reason(text: str, message: str) -> None:
    with pytest.raises(AccountsError, match=message):
        parse_accounts(text)


def test_a_missing_file_is_an_error_unless_allowed(tmp_path: Path) -> None:
    with pytest.raises(AccountsError, match="no such tokens file"):
        load_accounts(tmp_path / "none.json")
    assert len(load_accounts(tmp_path / "none.json", missing_ok=True)) == 0


def test_removing_a_user_revokes_their_token() -> None:
    accounts, token = Accounts().add("alice", "admin")
    assert accounts.remove("alice").authenticate(token) is None
    with pytest.raises(AccountsError):
        accounts.remove("nobody")
