"""Who may use the dashboard, and the signed cookie that keeps them logged in.

Logins come from the farm's tokens file (farm_core/accounts.py: a user's API token logs them
in with their API roles, per project, capped by the token's scope) and, optionally, one
shared password (`DEVICEFARM_DASHBOARD_PASSWORD`: role `submit` in project `default`).
Neither configured: no login at all, and every project is shown. A viewer sees the
projects they belong to (an admin: all); the pages filter by `Viewer.projects`.

A login gives a cookie `name.fingerprint.expiry.mac` (the fingerprint: of the token logged
in with; HMAC-SHA256 with `DEVICEFARM_DASHBOARD_SECRET`, else a random key per process: a
restart logs everyone out). Each check re-reads the tokens file (when it changed): a
removed user, a revoked or expired token or a new password ends the sessions made with it,
and a changed role applies at once.
No Streamlit here: serve.py's middleware and the pages share it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from farm_core.accounts import (
    DEFAULT_PROJECT,
    ENV_TOKENS,
    READ,
    SUBMIT,
    WRITE_ROLES,
    Accounts,
    Identity,
    load_accounts,
    utcnow,
)
from farm_core.token_use import UseLog

ENV_PASSWORD = "DEVICEFARM_DASHBOARD_PASSWORD"
ENV_SECRET = "DEVICEFARM_DASHBOARD_SECRET"
ENV_SESSION_S = "DEVICEFARM_DASHBOARD_SESSION_S"
COOKIE = "devicefarm_session"
#: How long a login lasts without logging in again.
SESSION_S = 12 * 3600
#: The shared password's user (no name of the tokens file can hold a space).
PASSWORD_USER = "password user"
_FINGERPRINT_CHARS = 16


@dataclass(frozen=True)
class Viewer:
    """Someone logged in (or anyone, when no login is configured): their highest role and
    their role in each project they see (`roles` None: every project, with `role`)."""

    name: str
    role: str
    roles: tuple[tuple[str, str], ...] | None = None
    #: the sha256 prefix of the token (or password) they logged in with: their cookie's
    fingerprint: str = ""

    @property
    def can_write(self) -> bool:
        """May submit, cancel and re-run somewhere (the API's roles admin and submit)."""
        return self.role in WRITE_ROLES

    @property
    def projects(self) -> tuple[str, ...] | None:
        """The projects whose campaigns, results and models they see (None: all)."""
        return None if self.roles is None else tuple(p for p, _ in self.roles)

    def writable_projects(self) -> tuple[str, ...] | None:
        """The projects they may submit to (None: any)."""
        if not self.can_write:
            return ()
        return None if self.roles is None else tuple(p for p, r in self.roles if r != READ)

    @classmethod
    def of(cls, who: Identity) -> Viewer:
        """The viewer an API identity is (its roles capped by its token's scope)."""
        roles = None
        if who.projects is not None:
            roles = tuple((p, str(who.role_in(p))) for p in who.projects)
        return cls(who.name, who.role, roles, _fingerprint(who.token.sha256))


def projects_of(viewer: Viewer | None) -> tuple[str, ...] | None:
    """The projects a page shows (None: all; nobody logged in: none)."""
    return () if viewer is None else viewer.projects


#: Everyone, on a dashboard with no login configured.
ANYONE = Viewer("anyone", SUBMIT)
#: The shared password's viewer: a submitter in project default.
PASSWORD_VIEWER = Viewer(PASSWORD_USER, SUBMIT, ((DEFAULT_PROJECT, SUBMIT),))


def _fingerprint(digest: str) -> str:
    return digest[:_FINGERPRINT_CHARS]


class Gate:
    """The dashboard's logins: checks secrets, issues and verifies session cookies."""

    def __init__(
        self,
        tokens_path: Path | None,
        password: str | None,
        key: bytes,
        session_s: float = SESSION_S,
        clock=time.time,
    ):
        self.tokens_path = tokens_path
        self.password = password or None
        self.key = key
        self.session_s = session_s
        self.clock = clock
        self._accounts = Accounts()
        self._stamp: tuple[int, int] | None = None
        self._lock = threading.Lock()
        #: token logins noted as their tokens' last use (farm_core.token_use)
        self.uses = UseLog(tokens_path) if tokens_path is not None else None

    @classmethod
    def from_env(cls) -> Gate:
        """Tokens from `DEVICEFARM_TOKENS` (or tokens.json in DEVICEFARM_HOME when it
        exists), the shared password, the cookie key and the session length."""
        from farm_core.accounts import default_tokens_path

        path = default_tokens_path()
        tokens = path if os.environ.get(ENV_TOKENS) or path.exists() else None
        secret = os.environ.get(ENV_SECRET, "")
        key = hashlib.sha256(secret.encode()).digest() if secret else _PROCESS_KEY
        try:
            session_s = float(os.environ.get(ENV_SESSION_S) or SESSION_S)
        except ValueError:
            session_s = SESSION_S
        return cls(tokens, os.environ.get(ENV_PASSWORD), key, session_s)

    @property
    def enabled(self) -> bool:
        """Whether visitors must log in."""
        return self.tokens_path is not None or self.password is not None

    def accounts(self) -> Accounts:
        """The tokens file's users, re-read when it changed (none when it is missing or
        broken: nobody logs in with a token then)."""
        if self.tokens_path is None:
            return Accounts()
        try:
            st = self.tokens_path.stat()
            stamp = (st.st_mtime_ns, st.st_size)
        except OSError:
            return Accounts()
        with self._lock:
            if stamp != self._stamp:
                try:
                    self._accounts = load_accounts(self.tokens_path)
                except Exception:  # noqa: BLE001 - a broken file lets nobody in
                    self._accounts = Accounts()
                self._stamp = stamp
            return self._accounts

    def _session(self, viewer_name: str, fingerprint: str) -> Viewer | None:
        """Today's viewer of a login: the password, or the user's live token whose sha256
        starts with `fingerprint`."""
        if viewer_name == PASSWORD_USER:
            if self.password is None:
                return None
            viewer = self._password_viewer()
            return viewer if hmac.compare_digest(viewer.fingerprint, fingerprint) else None
        user = self.accounts().get(viewer_name)
        now = utcnow()
        for token in user.tokens if user else ():
            if hmac.compare_digest(_fingerprint(token.sha256), fingerprint):
                return None if token.refusal(now) else Viewer.of(Identity(user, token))
        return None

    def _password_viewer(self) -> Viewer:
        digest = hashlib.sha256(str(self.password).encode()).hexdigest()
        return replace(PASSWORD_VIEWER, fingerprint=_fingerprint(digest))

    def check(self, given: str) -> Viewer | None:
        """The viewer `given` (a live token or the password) logs in as, or None."""
        if not given:
            return None
        now = utcnow()
        who = self.accounts().authenticate(given, now)
        if who is not None:
            if self.uses is not None:
                self.uses.used(who.token.id, now)
            return Viewer.of(who)
        if self.password is not None and hmac.compare_digest(
            given.encode(), self.password.encode()
        ):
            return self._password_viewer()
        return None

    def _mac(self, payload: str) -> str:
        mac = hmac.new(self.key, payload.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).decode().rstrip("=")

    def issue(self, viewer: Viewer) -> str:
        """A cookie value for `viewer` (as `check` made it), valid `session_s`."""
        assert viewer.fingerprint, viewer
        name = base64.urlsafe_b64encode(viewer.name.encode()).decode().rstrip("=")
        payload = f"{name}.{viewer.fingerprint}.{int(self.clock() + self.session_s)}"
        return f"{payload}.{self._mac(payload)}"

    def verify(self, cookie: str | None) -> Viewer | None:
        """The viewer a cookie stands for, if it is ours, unexpired, and the token it was
        made with is still live (or the password the same); the roles are today's."""
        if not cookie or cookie.count(".") != 3:
            return None
        payload, _, mac = cookie.rpartition(".")
        if not hmac.compare_digest(mac, self._mac(payload)):
            return None
        name_b64, fingerprint, expiry = payload.split(".")
        try:
            name = base64.urlsafe_b64decode(name_b64 + "=" * (-len(name_b64) % 4)).decode()
            if int(expiry) < self.clock():
                return None
        except ValueError:
            return None
        return self._session(name, fingerprint)


_gates: dict[tuple[str, ...], Gate] = {}
_gate_lock = threading.Lock()
#: The cookie key when DEVICEFARM_DASHBOARD_SECRET is unset: random, one per process.
_PROCESS_KEY = secrets.token_bytes(32)


def gate() -> Gate:
    """The gate for the current settings, one per process and settings (the middleware
    and every page share its key)."""
    from farm_core.accounts import default_tokens_path

    env = (ENV_TOKENS, ENV_PASSWORD, ENV_SECRET, ENV_SESSION_S)
    settings = (*(os.environ.get(k, "") for k in env), str(default_tokens_path()))
    with _gate_lock:
        if settings not in _gates:
            _gates[settings] = Gate.from_env()
        return _gates[settings]
