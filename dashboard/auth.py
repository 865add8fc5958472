"""Who may use the dashboard, and the signed cookie that keeps them logged in.

Logins come from the farm's tokens file (farm_core/accounts.py: a user's API token logs them
in with their API role) and, optionally, one shared password
(`DEVICEFARM_DASHBOARD_PASSWORD`, role `submit`). Neither configured: no login at all.

A login gives a cookie `name.role.fingerprint.expiry.mac` (HMAC-SHA256 with
`DEVICEFARM_DASHBOARD_SECRET`, else a random key per process: a restart logs everyone out).
Each check re-reads the tokens file (when it changed): a removed user, a new token or a new
password ends the sessions made with the old one, and a changed role applies at once.
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
from dataclasses import dataclass
from pathlib import Path

from farm_core.accounts import ENV_TOKENS, SUBMIT, WRITE_ROLES, Accounts, load_accounts

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
    """Someone logged in (or anyone, when no login is configured)."""

    name: str
    role: str

    @property
    def can_write(self) -> bool:
        """May submit, cancel and re-run (the API's roles admin and submit)."""
        return self.role in WRITE_ROLES


#: Everyone, on a dashboard with no login configured.
ANYONE = Viewer("anyone", SUBMIT)


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

    def _digest_of(self, viewer_name: str) -> tuple[str, str] | None:
        """(role, sha256) of a current user: a tokens-file user or the password."""
        if viewer_name == PASSWORD_USER:
            if self.password is None:
                return None
            return SUBMIT, hashlib.sha256(self.password.encode()).hexdigest()
        user = self.accounts().get(viewer_name)
        return (user.role, user.token_sha256) if user else None

    def check(self, given: str) -> Viewer | None:
        """The viewer `given` (a token or the password) logs in as, or None."""
        if not given:
            return None
        user = self.accounts().authenticate(given)
        if user is not None:
            return Viewer(user.name, user.role)
        if self.password is not None and hmac.compare_digest(
            given.encode(), self.password.encode()
        ):
            return Viewer(PASSWORD_USER, SUBMIT)
        return None

    def _mac(self, payload: str) -> str:
        mac = hmac.new(self.key, payload.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).decode().rstrip("=")

    def issue(self, viewer: Viewer) -> str:
        """A cookie value for `viewer`, valid `session_s`."""
        found = self._digest_of(viewer.name)
        assert found is not None, viewer
        name = base64.urlsafe_b64encode(viewer.name.encode()).decode().rstrip("=")
        payload = f"{name}.{_fingerprint(found[1])}.{int(self.clock() + self.session_s)}"
        return f"{payload}.{self._mac(payload)}"

    def verify(self, cookie: str | None) -> Viewer | None:
        """The viewer a cookie stands for, if it is ours, unexpired, and its user's token
        (or the password) is still the one it was made with; the role is today's."""
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
        found = self._digest_of(name)
        if found is None or not hmac.compare_digest(fingerprint, _fingerprint(found[1])):
            return None
        return Viewer(name, found[0])


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
