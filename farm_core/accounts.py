"""The farm's users: a name, a role, and the sha256 of their bearer token.

One tokens file (JSON) serves the HTTP API and the dashboard login, so a user has the same
role in both. The file never holds a token, only its sha256; `Accounts.add` makes a new
random token and returns it once.

    {"users": [{"name": "alice", "role": "submit", "token_sha256": "<64 hex digits>"}]}

Roles: `read` may only look (GET); `submit` may also submit, cancel and re-run; `admin`
may do everything.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

#: The tokens file's path (default: tokens.json in the farm's home folder).
ENV_TOKENS = "DEVICEFARM_TOKENS"

ADMIN, SUBMIT, READ = "admin", "submit", "read"
ROLES: tuple[str, ...] = (ADMIN, SUBMIT, READ)
#: Roles that may change the farm (submit, cancel, re-run).
WRITE_ROLES = frozenset({ADMIN, SUBMIT})

#: A user name: letters, digits and `._@-`, starting with a letter or digit.
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
_SHA256_RE = re.compile(r"[0-9a-f]{64}")
#: Prefix of every token this module makes (recognisable in logs and secret scanners).
TOKEN_PREFIX = "dft_"
TOKEN_BYTES = 32  #: random bytes in a token


class AccountsError(ValueError):
    """A malformed tokens file or a bad user name/role."""


def default_tokens_path() -> Path:
    """`$DEVICEFARM_TOKENS`, else `tokens.json` under `DEVICEFARM_HOME`."""
    from .settings import home

    return Path(os.environ.get(ENV_TOKENS) or home() / "tokens.json")


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class User:
    name: str
    role: str
    token_sha256: str

    @property
    def can_write(self) -> bool:
        """Whether the user may submit, cancel and re-run (not only read)."""
        return self.role in WRITE_ROLES

    @property
    def is_admin(self) -> bool:
        return self.role == ADMIN


@dataclass(frozen=True)
class Accounts:
    users: tuple[User, ...] = ()

    def __iter__(self) -> Iterator[User]:
        return iter(self.users)

    def __len__(self) -> int:
        return len(self.users)

    def get(self, name: str) -> User | None:
        return next((u for u in self.users if u.name == name), None)

    def authenticate(self, token: str | None) -> User | None:
        """The user whose token this is, or None. Compares every digest in constant time."""
        if not token:
            return None
        digest = token_sha256(token)
        found = None
        for user in self.users:
            if hmac.compare_digest(digest, user.token_sha256):
                found = user
        return found

    def add(self, name: str, role: str) -> tuple[Accounts, str]:
        """These accounts with a new user (or a user's new token and role), and the token."""
        check_user(name, role)
        token = TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)
        user = User(name, role, token_sha256(token))
        others = tuple(u for u in self.users if u.name != name)
        return replace(self, users=(*others, user)), token

    def remove(self, name: str) -> Accounts:
        if self.get(name) is None:
            raise AccountsError(f"no user named {name!r}")
        return replace(self, users=tuple(u for u in self.users if u.name != name))

    def to_json(self) -> str:
        users = [{"name": u.name, "role": u.role, "token_sha256": u.token_sha256} for u in self]
        return json.dumps({"users": users}, indent=2) + "\n"


def check_user(name: str, role: str) -> None:
    if not NAME_RE.fullmatch(name):
        raise AccountsError(f"bad user name {name!r}: letters, digits and ._@- (at most 64)")
    if role not in ROLES:
        raise AccountsError(f"bad role {role!r}: one of {', '.join(ROLES)}")


def parse_accounts(text: str, source: str = "tokens file") -> Accounts:
    """Accounts from a tokens file's text; AccountsError names what is wrong."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AccountsError(f"{source}: not JSON ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("users"), list):
        raise AccountsError(f'{source}: expected {{"users": [...]}}')
    users: list[User] = []
    for i, entry in enumerate(data["users"]):
        if not isinstance(entry, dict):
            raise AccountsError(f"{source}: user {i} is not an object")
        name, role, digest = (entry.get(k) for k in ("name", "role", "token_sha256"))
        if not isinstance(name, str) or not isinstance(role, str):
            raise AccountsError(f"{source}: user {i} needs a name and a role")
        check_user(name, role)
        if not isinstance(digest, str) or not _SHA256_RE.fullmatch(digest):
            raise AccountsError(f"{source}: user {name!r}: token_sha256 must be 64 hex digits")
        if any(u.name == name for u in users):
            raise AccountsError(f"{source}: user {name!r} is listed twice")
        users.append(User(name, role, digest))
    return Accounts(tuple(users))


def load_accounts(path: str | os.PathLike[str], missing_ok: bool = False) -> Accounts:
    """The accounts in a tokens file (none when it is missing and `missing_ok`)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if missing_ok:
            return Accounts()
        raise AccountsError(f"{path}: no such tokens file") from None
    return parse_accounts(text, str(path))


def save_accounts(accounts: Accounts, path: str | os.PathLike[str]) -> None:
    """Write the tokens file atomically, readable by its owner only."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(accounts.to_json())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
