"""The farm's users: a name, a role in each project, and bearer tokens (sha256 only).

One tokens file (JSON) serves the HTTP API and the dashboard login, so a user has the same
roles in both. The file never holds a token, only its sha256; `Accounts.add_token` makes a
new random token and returns it once.

    {"version": 2, "users": [{"name": "alice", "admin": false,
      "projects": {"vision": "submit", "audio": "read"},
      "tokens": [{"id": "3f9c1a2b", "sha256": "<64 hex>", "scope": "submit",
                  "created": "2026-12-02T15:00:00", "expires": "2027-01-01T15:00:00",
                  "revoked": null}]}]}

Roles: `read` may only look; `submit` may also submit, cancel and re-run, in the projects
where the user has it; `admin` sees and may do everything, in every project. A token's
scope (read, submit, admin) caps what it may do below its user's role. A token expires at
`expires` (UTC; null: never) and stops working once `revoked` is set (kept, for the record).

Files of version 1 (`{"name", "role", "token_sha256"}` per user) still load: a `submit` or
`read` user has that role in project `default`, an admin is an admin, and the one token's
id is its sha256's first 8 hex digits. Saving writes version 2.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

#: The tokens file's path (default: tokens.json in the farm's home folder).
ENV_TOKENS = "DEVICEFARM_TOKENS"

ADMIN, SUBMIT, READ = "admin", "submit", "read"
ROLES: tuple[str, ...] = (ADMIN, SUBMIT, READ)
#: Roles a user may hold in one project (admin is farm-wide).
PROJECT_ROLES: tuple[str, ...] = (SUBMIT, READ)
#: Roles that may change the farm (submit, cancel, re-run).
WRITE_ROLES = frozenset({ADMIN, SUBMIT})
_RANK = {READ: 1, SUBMIT: 2, ADMIN: 3}
#: The project of a version-1 user's role (farm_core.schema.DEFAULT_PROJECT).
DEFAULT_PROJECT = "default"
FILE_VERSION = 2

#: A user or project name: letters, digits and `._@-`, starting with a letter or digit.
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
_SHA256_RE = re.compile(r"[0-9a-f]{64}")
_TOKEN_ID_RE = re.compile(r"[0-9a-f]{8,32}")
#: Prefix of every token this module makes (recognisable in logs and secret scanners).
TOKEN_PREFIX = "dft_"
TOKEN_BYTES = 32  #: random bytes in a token
TOKEN_ID_BYTES = 4  #: random bytes in a token's public id (8 hex digits)


class AccountsError(ValueError):
    """A malformed tokens file or a bad user, project, role or token."""


def default_tokens_path() -> Path:
    """`$DEVICEFARM_TOKENS`, else `tokens.json` under `DEVICEFARM_HOME`."""
    from .settings import home

    return Path(os.environ.get(ENV_TOKENS) or home() / "tokens.json")


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def utcnow() -> datetime:
    """Now in UTC, without a zone (as the database stores times)."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def naive_utc(d: datetime) -> datetime:
    """`d` in UTC without a zone (a time without one is taken as UTC)."""
    return d if d.tzinfo is None else d.astimezone(timezone.utc).replace(tzinfo=None)


def lesser(a: str, b: str) -> str:
    """The lesser of two roles (`read` < `submit` < `admin`)."""
    return a if _RANK[a] <= _RANK[b] else b


@dataclass(frozen=True)
class Token:
    """One bearer token of a user: its public id, its sha256 and what it may do."""

    id: str
    sha256: str
    scope: str  #: read, submit or admin: the most this token may do
    created: datetime | None = None
    expires: datetime | None = None  #: UTC; None: never
    revoked: datetime | None = None

    def refusal(self, now: datetime) -> str:
        """Why this token no longer works ("" while it does)."""
        if self.revoked is not None:
            return f"token {self.id} was revoked"
        if self.expires is not None and now >= self.expires:
            return f"token {self.id} expired at {self.expires:%Y-%m-%d %H:%M} UTC"
        return ""


@dataclass(frozen=True)
class User:
    """A user: an admin, or a member of projects with a role in each."""

    name: str
    admin: bool = False
    projects: tuple[tuple[str, str], ...] = ()  #: (project, role) pairs, sorted
    tokens: tuple[Token, ...] = ()

    @property
    def role(self) -> str:
        """The user's highest role (admin; else the highest of their project roles)."""
        if self.admin:
            return ADMIN
        return max((r for _, r in self.projects), key=_RANK.__getitem__, default=READ)

    def role_in(self, project: str) -> str | None:
        """The user's role in `project` (None: not a member)."""
        return ADMIN if self.admin else dict(self.projects).get(project)


@dataclass(frozen=True)
class Identity:
    """Who a request is: a user, through one of their tokens, which caps their roles."""

    user: User
    token: Token

    @property
    def name(self) -> str:
        return self.user.name

    @property
    def role(self) -> str:
        """The most this identity may do anywhere: the user's highest role, capped."""
        return lesser(self.user.role, self.token.scope)

    @property
    def can_write(self) -> bool:
        """Whether it may change something in some project."""
        return self.role in WRITE_ROLES

    @property
    def is_admin(self) -> bool:
        return self.role == ADMIN

    @property
    def projects(self) -> tuple[str, ...] | None:
        """The projects it sees: None for all (an admin user, whatever the token's scope)."""
        return None if self.user.admin else tuple(p for p, _ in self.user.projects)

    def role_in(self, project: str) -> str | None:
        """Its role in `project`, capped by the token's scope (None: does not see it)."""
        role = self.user.role_in(project)
        return None if role is None else lesser(role, self.token.scope)

    def sees(self, project: str) -> bool:
        return self.role_in(project) is not None

    def writable_projects(self) -> tuple[str, ...] | None:
        """Projects where it may submit and change (None: all)."""
        if not self.can_write:
            return ()
        if self.user.admin:
            return None
        return tuple(p for p, r in self.user.projects if lesser(r, self.token.scope) != READ)


@dataclass(frozen=True)
class Accounts:
    users: tuple[User, ...] = ()

    def __iter__(self) -> Iterator[User]:
        return iter(self.users)

    def __len__(self) -> int:
        return len(self.users)

    def get(self, name: str) -> User | None:
        return next((u for u in self.users if u.name == name), None)

    def tokens(self) -> Iterator[tuple[User, Token]]:
        for user in self.users:
            for token in user.tokens:
                yield user, token

    def check(self, token: str | None, now: datetime | None = None) -> tuple[Identity | None, str]:
        """(the identity this token stands for, "") or (None, why not). Compares every
        digest in constant time."""
        if not token:
            return None, "no token"
        digest = token_sha256(token)
        found = None
        for user, t in self.tokens():
            if hmac.compare_digest(digest, t.sha256):
                found = Identity(user, t)
        if found is None:
            return None, "unknown token"
        why = found.token.refusal(now or utcnow())
        return (None, why) if why else (found, "")

    def authenticate(self, token: str | None, now: datetime | None = None) -> Identity | None:
        """The identity whose live token this is, or None."""
        return self.check(token, now)[0]

    def set_user(
        self, name: str, admin: bool = False, projects: Mapping[str, str] | None = None
    ) -> Accounts:
        """These accounts with `name` made (or changed to) an admin or a member of
        `projects` ({project: role}); their tokens stay."""
        check_name(name, "user")
        pairs = _project_pairs(projects or {})
        if not admin and not pairs:
            raise AccountsError(f"user {name!r} needs a project role or the admin role")
        old = self.get(name)
        user = User(name, admin, () if admin else pairs, old.tokens if old else ())
        return self._put(user)

    def add_token(
        self,
        name: str,
        scope: str | None = None,
        expires: datetime | None = None,
        now: datetime | None = None,
    ) -> tuple[Accounts, Token, str]:
        """A new token for user `name` (scope: default the user's role; at most it), the
        accounts with it, and the token (shown once)."""
        user = self.get(name)
        if user is None:
            raise AccountsError(f"no user named {name!r}")
        scope = scope or user.role
        if scope not in ROLES:
            raise AccountsError(f"bad scope {scope!r}: one of {', '.join(ROLES)}")
        if _RANK[scope] > _RANK[user.role]:
            raise AccountsError(f"a token's scope ({scope}) cannot exceed its user's role")
        now = now or utcnow()
        if expires is not None and expires <= now:
            raise AccountsError("a token must expire in the future")
        taken = {t.id for _, t in self.tokens()}
        token_id = secrets.token_hex(TOKEN_ID_BYTES)
        while token_id in taken:
            token_id = secrets.token_hex(TOKEN_ID_BYTES)
        secret = TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)
        made = Token(token_id, token_sha256(secret), scope, now.replace(microsecond=0), expires)
        return self._put(replace(user, tokens=(*user.tokens, made))), made, secret

    def add(self, name: str, role: str) -> tuple[Accounts, str]:
        """A version-1 style add: `name` with `role` (in project default unless admin) and
        a new token (their other tokens stay)."""
        check_role(role)
        projects = {} if role == ADMIN else {DEFAULT_PROJECT: role}
        accounts, _, secret = self.set_user(name, role == ADMIN, projects).add_token(name)
        return accounts, secret

    def revoke(self, token_id: str, now: datetime | None = None) -> tuple[Accounts, User]:
        """These accounts with token `token_id` revoked (its user stays), and its user."""
        for user, t in self.tokens():
            if t.id == token_id:
                if t.revoked is not None:
                    raise AccountsError(f"token {token_id} was already revoked")
                gone = replace(t, revoked=(now or utcnow()).replace(microsecond=0))
                tokens = tuple(gone if x.id == token_id else x for x in user.tokens)
                return self._put(replace(user, tokens=tokens)), user
        raise AccountsError(f"no token {token_id!r} (`devicefarm api token list` lists them)")

    def remove(self, name: str) -> Accounts:
        if self.get(name) is None:
            raise AccountsError(f"no user named {name!r}")
        return replace(self, users=tuple(u for u in self.users if u.name != name))

    def _put(self, user: User) -> Accounts:
        users = [user if u.name == user.name else u for u in self.users]
        if self.get(user.name) is None:
            users.append(user)
        return replace(self, users=tuple(users))

    def to_json(self) -> str:
        users = [
            {
                "name": u.name,
                "admin": u.admin,
                "projects": dict(u.projects),
                "tokens": [_token_json(t) for t in u.tokens],
            }
            for u in self
        ]
        return json.dumps({"version": FILE_VERSION, "users": users}, indent=2) + "\n"


def _token_json(t: Token) -> dict[str, Any]:
    def iso(d: datetime | None) -> str | None:
        return None if d is None else d.isoformat()

    return {
        "id": t.id,
        "sha256": t.sha256,
        "scope": t.scope,
        "created": iso(t.created),
        "expires": iso(t.expires),
        "revoked": iso(t.revoked),
    }


def check_name(name: str, what: str) -> None:
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise AccountsError(f"bad {what} name {name!r}: letters, digits and ._@- (at most 64)")


def check_role(role: str, roles: tuple[str, ...] = ROLES) -> None:
    if role not in roles:
        raise AccountsError(f"bad role {role!r}: one of {', '.join(roles)}")


def check_user(name: str, role: str) -> None:
    check_name(name, "user")
    check_role(role)


def _project_pairs(projects: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    for project, role in projects.items():
        check_name(project, "project")
        check_role(role, PROJECT_ROLES)
    return tuple(sorted(projects.items()))


# --- the file -----------------------------------------------------------------------------


def parse_accounts(text: str, source: str = "tokens file") -> Accounts:
    """Accounts from a tokens file's text (version 1 or 2); AccountsError names what is
    wrong."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AccountsError(f"{source}: not JSON ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("users"), list):
        raise AccountsError(f'{source}: expected {{"users": [...]}}')
    users: list[User] = []
    ids: set[str] = set()
    for i, entry in enumerate(data["users"]):
        if not isinstance(entry, dict):
            raise AccountsError(f"{source}: user {i} is not an object")
        try:
            user = _user_v1(entry) if "token_sha256" in entry else _user_v2(entry)
        except AccountsError as exc:
            raise AccountsError(f"{source}: user {i}: {exc}") from None
        if any(u.name == user.name for u in users):
            raise AccountsError(f"{source}: user {user.name!r} is listed twice")
        for t in user.tokens:
            if t.id in ids:
                raise AccountsError(f"{source}: token id {t.id} is listed twice")
            ids.add(t.id)
        users.append(user)
    return Accounts(tuple(users))


def _user_v1(entry: dict[str, Any]) -> User:
    name, role, digest = (entry.get(k) for k in ("name", "role", "token_sha256"))
    if not isinstance(name, str) or not isinstance(role, str):
        raise AccountsError("needs a name and a role")
    check_user(name, role)
    _check_sha256(name, digest)
    projects = () if role == ADMIN else ((DEFAULT_PROJECT, role),)
    return User(name, role == ADMIN, projects, (Token(digest[:8], digest, role),))


def _user_v2(entry: dict[str, Any]) -> User:
    name, admin, projects = entry.get("name"), entry.get("admin", False), entry.get("projects", {})
    check_name(name, "user")
    if not isinstance(admin, bool) or not isinstance(projects, dict):
        raise AccountsError(f"{name!r}: admin must be true/false, projects an object")
    pairs = _project_pairs(projects)
    tokens = entry.get("tokens", [])
    if not isinstance(tokens, list) or not all(isinstance(t, dict) for t in tokens):
        raise AccountsError(f"{name!r}: tokens must be a list of objects")
    user = User(name, admin, () if admin else pairs)
    return replace(user, tokens=tuple(_token_v2(name, t, user.role) for t in tokens))


def _token_v2(name: str, t: dict[str, Any], role: str) -> Token:
    token_id, digest, scope = t.get("id"), t.get("sha256"), t.get("scope", role)
    if not isinstance(token_id, str) or not _TOKEN_ID_RE.fullmatch(token_id):
        raise AccountsError(f"{name!r}: a token id must be 8 to 32 hex digits")
    _check_sha256(name, digest)
    if scope not in ROLES:
        raise AccountsError(f"{name!r}: token {token_id}: bad scope {scope!r}")
    times = [_time(name, token_id, k, t.get(k)) for k in ("created", "expires", "revoked")]
    return Token(token_id, digest, scope, *times)


def _time(name: str, token_id: str, key: str, value: Any) -> datetime | None:
    if value is None:
        return None
    try:
        return naive_utc(datetime.fromisoformat(value))
    except (TypeError, ValueError):
        raise AccountsError(f"{name!r}: token {token_id}: {key} is not an ISO time") from None


def _check_sha256(name: str, digest: Any) -> None:
    if not isinstance(digest, str) or not _SHA256_RE.fullmatch(digest):
        raise AccountsError(f"user {name!r}: token_sha256 must be 64 hex digits")


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
    write_private(Path(path), accounts.to_json())


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` atomically (a temporary file renamed), mode 0600."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


#: Units of an expiry given as a duration (`30d`).
DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_expiry(text: str, now: datetime | None = None) -> datetime | None:
    """When a token given `--expires TEXT` expires: `never`, a duration (`90m`, `12h`,
    `30d`, `2w`) from now, or an ISO date/time (UTC)."""
    text = text.strip().lower()
    if text == "never":
        return None
    now = now or utcnow()
    m = re.fullmatch(r"(\d{1,6})([smhdw])", text)
    if m:
        return now.replace(microsecond=0) + timedelta(seconds=int(m[1]) * DURATION_UNITS[m[2]])
    try:
        return naive_utc(datetime.fromisoformat(text.upper()))
    except ValueError:
        raise AccountsError(
            f"--expires {text[:40]!r}: give never, a duration (30d, 12h, 2w) or an ISO date"
        ) from None
