"""Projects, scopes, expiry and revocation in the tokens file (farm_core/accounts.py), the
tokens' last use (farm_core/token_use.py) and `devicefarm api token` (issue 42)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from farm_core.accounts import (
    Accounts,
    AccountsError,
    load_accounts,
    parse_accounts,
    parse_expiry,
    save_accounts,
)
from farm_core.token_use import UseLog, load_uses, uses_path

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 12, 1, 12, 0, 0)


def team() -> tuple[Accounts, dict[str, str]]:
    accounts = Accounts().set_user("vera", projects={"vision": "submit", "audio": "read"})
    accounts = accounts.set_user("root", admin=True)
    tokens = {}
    accounts, _, tokens["vera"] = accounts.add_token("vera", now=NOW)
    accounts, _, tokens["root"] = accounts.add_token("root", now=NOW)
    accounts, _, tokens["root-read"] = accounts.add_token("root", scope="read", now=NOW)
    return accounts, tokens


def test_a_member_has_a_role_per_project_and_sees_only_those() -> None:
    accounts, tokens = team()
    vera = accounts.authenticate(tokens["vera"], NOW)
    assert (vera.role_in("vision"), vera.role_in("audio"), vera.role_in("other")) == (
        "submit",
        "read",
        None,
    )
    assert vera.projects == ("audio", "vision") and vera.writable_projects() == ("vision",)
    assert not vera.is_admin and vera.can_write


def test_an_admin_sees_every_project() -> None:
    accounts, tokens = team()
    root = accounts.authenticate(tokens["root"], NOW)
    assert root.projects is None and root.role_in("anything") == "admin" and root.is_admin


def test_a_read_scoped_admin_token_sees_everything_and_may_only_read() -> None:
    accounts, tokens = team()
    who = accounts.authenticate(tokens["root-read"], NOW)
    assert who.projects is None and who.role_in("vision") == "read"
    assert not who.can_write and not who.is_admin and who.writable_projects() == ()


def test_a_scope_above_the_users_role_is_refused() -> None:
    accounts, _ = team()
    with pytest.raises(AccountsError, match="cannot exceed"):
        accounts.add_token("vera", scope="admin")


def test_a_token_expires() -> None:
    accounts = Accounts().set_user("vera", projects={"vision": "submit"})
    accounts, token, secret = accounts.add_token("vera", expires=NOW + timedelta(days=1), now=NOW)
    assert accounts.authenticate(secret, NOW + timedelta(hours=23)) is not None
    who, why = accounts.check(secret, NOW + timedelta(days=1))
    assert who is None and why == f"token {token.id} expired at 2026-12-02 12:00 UTC"


def test_a_past_expiry_is_refused() -> None:
    accounts = Accounts().set_user("vera", projects={"vision": "submit"})
    with pytest.raises(AccountsError, match="future"):
        accounts.add_token("vera", expires=NOW - timedelta(seconds=1), now=NOW)


def test_a_revoked_token_stops_and_the_users_other_tokens_go_on() -> None:
    accounts, tokens = team()
    rid = accounts.authenticate(tokens["root"]).token.id
    accounts, user = accounts.revoke(rid, NOW)
    assert user.name == "root"
    assert accounts.check(tokens["root"]) == (None, f"token {rid} was revoked")
    assert accounts.authenticate(tokens["root-read"]) is not None
    with pytest.raises(AccountsError, match="already revoked"):
        accounts.revoke(rid)
    with pytest.raises(AccountsError, match="no token"):
        accounts.revoke("deadbeef")


def test_version_2_round_trips_through_the_file(tmp_path: Path) -> None:
    accounts, tokens = team()
    accounts, _ = accounts.revoke(accounts.authenticate(tokens["root"]).token.id, NOW)
    path = tmp_path / "tokens.json"
    save_accounts(accounts, path)
    assert load_accounts(path) == accounts
    assert all(t not in path.read_text() for t in tokens.values())


def test_a_version_1_file_still_loads_a_plain_role_in_project_default() -> None:
    digests = {n: f"{i}" * 64 for i, n in enumerate(("ann", "sam", "rita"))}
    text = json.dumps(
        {
            "users": [
                {"name": "ann", "role": "admin", "token_sha256": digests["ann"]},
                {"name": "sam", "role": "submit", "token_sha256": digests["sam"]},
                {"name": "rita", "role": "read", "token_sha256": digests["rita"]},
            ]
        }
    )
    accounts = parse_accounts(text)
    ann, sam, rita = (accounts.get(n) for n in ("ann", "sam", "rita"))
    assert ann.admin and ann.projects == ()
    assert sam.projects == (("default", "submit"),) and rita.projects == (("default", "read"),)
    assert [t.id for t in sam.tokens] == [digests["sam"][:8]]
    assert sam.tokens[0].scope == "submit" and sam.tokens[0].expires is None


def test_a_version_1_token_authenticates_as_before() -> None:
    import hashlib

    secret = "dft_old"
    text = json.dumps(
        {
            "users": [
                {
                    "name": "sam",
                    "role": "submit",
                    "token_sha256": hashlib.sha256(secret.encode()).hexdigest(),
                }
            ]
        }
    )
    who = parse_accounts(text).authenticate(secret)
    assert (who.name, who.role, who.role_in("default"), who.role_in("x")) == (
        "sam",
        "submit",
        "submit",
        None,
    )


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ({"name": "a", "projects": {"p": "admin"}}, "bad role"),
        ({"name": "a", "projects": {"../p": "read"}}, "bad project name"),
        ({"name": "a", "projects": {}, "tokens": [{"id": "x", "sha256": "0" * 64}]}, "token id"),
        (
            {"name": "a", "tokens": [{"id": "abcdef01", "sha256": "0" * 64, "expires": "soon"}]},
            "not an ISO time",
        ),
        (
            {"name": "a", "tokens": [{"id": "abcdef01", "sha256": "0" * 64, "scope": "god"}]},
            "scope",
        ),
    ],
)
def test_a_malformed_version_2_entry_is_refused_with_a_reason(entry: dict, words: str) -> None:
    with pytest.raises(AccountsError, match=words):
        parse_accounts(json.dumps({"version": 2, "users": [entry]}))


def test_a_token_id_listed_twice_is_refused() -> None:
    token = {"id": "abcdef01", "sha256": "0" * 64}
    users = [{"name": "a", "tokens": [token]}, {"name": "b", "tokens": [token]}]
    with pytest.raises(AccountsError, match="listed twice"):
        parse_accounts(json.dumps({"version": 2, "users": users}))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("never", None),
        ("90m", NOW + timedelta(minutes=90)),
        ("12h", NOW + timedelta(hours=12)),
        ("30d", NOW + timedelta(days=30)),
        ("2w", NOW + timedelta(weeks=2)),
        ("2027-01-01", datetime(2027, 1, 1)),
        ("2027-01-01T10:00:00+02:00", datetime(2027, 1, 1, 8)),
    ],
)
def test_an_expiry_is_a_duration_a_date_or_never(text: str, expected: datetime | None) -> None:
    assert parse_expiry(text, NOW) == expected


@pytest.mark.parametrize("text", ["", "30", "30y", "-1d", "tomorrow"])
def test_a_bad_expiry_is_refused(text: str) -> None:
    with pytest.raises(AccountsError, match="--expires"):
        parse_expiry(text, NOW)


# --- last use ------------------------------------------------------------------------------


def test_a_use_is_written_beside_the_tokens_file_not_into_it(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text("{}")
    uses = UseLog(tokens, flush_s=3600)
    uses.used("abcdef01", NOW)
    uses.used("abcdef01", NOW + timedelta(seconds=5))
    assert load_uses(tokens) == {}  # in memory until the flush
    uses.flush()
    assert load_uses(tokens) == {"abcdef01": NOW + timedelta(seconds=5)}
    assert tokens.read_text() == "{}" and uses_path(tokens).name == "tokens.json.used"
    assert (os.stat(uses_path(tokens)).st_mode & 0o777) == 0o600


def test_uses_are_written_by_a_timer_without_another_request(tmp_path: Path) -> None:
    from tests.support.farm import wait_until

    tokens = tmp_path / "tokens.json"
    UseLog(tokens, flush_s=0.05).used("abcdef01", NOW)
    wait_until(lambda: load_uses(tokens), 5.0, "the timer's write")


def test_two_writers_keep_the_later_use_of_each_token(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    api, dashboard = UseLog(tokens, 3600), UseLog(tokens, 3600)
    api.used("aaaaaaaa", NOW + timedelta(hours=1))
    api.used("bbbbbbbb", NOW)
    dashboard.used("aaaaaaaa", NOW)
    dashboard.used("cccccccc", NOW)
    api.flush()
    dashboard.flush()
    assert load_uses(tokens) == {
        "aaaaaaaa": NOW + timedelta(hours=1),
        "bbbbbbbb": NOW,
        "cccccccc": NOW,
    }


# --- the command ---------------------------------------------------------------------------


def devicefarm(*args: str, tokens: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "devicefarm.cli", "api", "token", *args, "--tokens", str(tokens)],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        timeout=120,
    )


def test_the_token_command_adds_lists_and_revokes(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    made = devicefarm(
        "add", "vera", "--role", "submit", "--project", "vision", "--project", "audio:read",
        "--expires", "30d", tokens=path,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert "(audio:read,vision:submit)" in made.stderr and "scope submit" in made.stderr
    second = devicefarm("add", "vera", "--scope", "read", tokens=path)  # keeps her projects
    assert second.returncode == 0, second.stderr
    accounts = load_accounts(path)
    first_id = accounts.authenticate(made.stdout.strip()).token.id
    second_id = accounts.authenticate(second.stdout.strip()).token.id
    assert accounts.get("vera").projects == (("audio", "read"), ("vision", "submit"))
    listed = devicefarm("list", tokens=path).stdout.splitlines()
    assert listed[0].split()[:4] == ["USER", "ROLES", "TOKEN", "SCOPE"]
    assert len(listed) == 3 and all(line.endswith("active") for line in listed[1:])
    revoked = devicefarm("revoke", first_id, tokens=path)
    assert revoked.returncode == 0, revoked.stderr
    states = {line.split()[2]: line for line in devicefarm("list", tokens=path).stdout.splitlines()}
    assert "revoked" in states[first_id] and states[second_id].endswith("active")
    assert load_accounts(path).authenticate(second.stdout.strip()) is not None


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["add", "new"], "give --role"),
        (["add", "new", "--project", "p"], "give its role"),
        (["add", "new", "--role", "admin", "--project", "p"], "admin sees every project"),
        (["add", "new", "--role", "read", "--scope", "submit"], "cannot exceed"),
        (["add", "new", "--role", "read", "--expires", "soon"], "--expires"),
        (["revoke", "deadbeef"], "no token"),
    ],
)
def test_the_token_command_refuses_with_a_reason(
    tmp_path: Path, args: list[str], words: str
) -> None:
    save_accounts(Accounts(), tmp_path / "tokens.json")
    done = devicefarm(*args, tokens=tmp_path / "tokens.json")
    assert done.returncode == 1 and words in done.stderr, done.stderr


def test_a_project_role_must_be_submit_or_read(tmp_path: Path) -> None:
    done = devicefarm("add", "x", "--project", "p:admin", tokens=tmp_path / "t.json")
    assert done.returncode == 2 and "one of submit, read" in done.stderr
