"""Bearer-token auth over the tokens file (farm_core.accounts): 401 without a known token,
403 when a read-only user asks to change something."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from starlette.requests import Request

from farm_core.accounts import Accounts, AccountsError, User, load_accounts

from .errors import ApiError

log = logging.getLogger(__name__)

#: The header a 401 carries (RFC 6750).
CHALLENGE = {"WWW-Authenticate": 'Bearer realm="devicefarm"'}


class TokenStore:
    """The tokens file's accounts, read again when the file changes (a token added or
    removed takes effect without a restart)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._accounts = Accounts()
        self.accounts()  # a missing or malformed file fails at start, not at the first call

    def accounts(self) -> Accounts:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            raise AccountsError(f"{self.path}: no such tokens file") from None
        stamp = (st.st_mtime_ns, st.st_size)
        with self._lock:
            if stamp != self._stamp:
                self._accounts, self._stamp = load_accounts(self.path), stamp
            return self._accounts


def bearer_token(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def authenticate(request: Request, store: TokenStore, write: bool) -> User:
    """The request's user; ApiError 401 (no or unknown token) or 403 (read-only, `write`)."""
    token = bearer_token(request)
    if token is None:
        raise ApiError(401, "no bearer token (Authorization: Bearer TOKEN)", headers=CHALLENGE)
    try:
        user = store.accounts().authenticate(token)
    except (OSError, ValueError) as exc:  # the file went missing or bad since the start
        log.error("tokens file %s: %s", store.path, exc)
        raise ApiError(503, "the server cannot read its tokens file") from exc
    if user is None:
        raise ApiError(401, "unknown token", headers=CHALLENGE)
    if write and not user.can_write:
        raise ApiError(403, f"user {user.name!r} has the {user.role} role: it may only read")
    return user
