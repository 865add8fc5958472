"""Bearer-token auth over the tokens file (farm_core.accounts): 401 without a live token
(unknown, expired or revoked), 403 when a read-only identity asks to change something, and
the project checks every route makes (`Access`): another project's campaign is a 404, as
one that does not exist, so that ids do not leak; a read-only member changing it a 403.

Every authenticated request is logged (user, token id, project) by `Access.log`, and each
token's last use is kept (farm_core.token_use)."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from starlette.requests import Request

from farm_core.accounts import (
    DEFAULT_PROJECT,
    READ,
    WRITE_ROLES,
    Accounts,
    AccountsError,
    Identity,
    load_accounts,
    utcnow,
)
from farm_core.token_use import UseLog

from .errors import ApiError

log = logging.getLogger(__name__)

#: The header a 401 carries (RFC 6750).
CHALLENGE = {"WWW-Authenticate": 'Bearer realm="devicefarm"'}
#: What the access log writes for a request that names no one project (lists, devices).
ANY_PROJECT = "*"


class TokenStore:
    """The tokens file's accounts, read again when the file changes (a token added or
    revoked takes effect without a restart), and the tokens' last uses."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.uses = UseLog(self.path)
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


def read_only_message(who: Identity, project: str | None = None) -> str:
    """Why `who` may not change anything (in `project`): its role, or its token's scope."""
    role = who.user.role_in(project) if project else who.user.role
    if role in WRITE_ROLES:  # the user may, the token may not
        return f"token {who.token.id} has the {who.token.scope} scope: it may only read"
    where = f" in project {project!r}" if project else ""
    return f"user {who.name!r} has the read role{where}: it may only read"


def authenticate(request: Request, store: TokenStore, write: bool) -> Identity:
    """The request's identity; ApiError 401 (no, unknown, expired or revoked token) or
    403 (`write`, and it may change nothing anywhere). Notes the token's use."""
    token = bearer_token(request)
    if token is None:
        raise ApiError(401, "no bearer token (Authorization: Bearer TOKEN)", headers=CHALLENGE)
    now = utcnow()
    try:
        who, why = store.accounts().check(token, now)
    except (OSError, ValueError) as exc:  # the file went missing or bad since the start
        log.error("tokens file %s: %s", store.path, exc)
        raise ApiError(503, "the server cannot read its tokens file") from exc
    if who is None:
        log.info(
            "refused %s %s: %s", request.method, request.url.path, why, extra={"summary_key": why}
        )
        raise ApiError(401, why, headers=CHALLENGE)
    store.uses.used(who.token.id, now)
    if write and not who.can_write:
        Access(request, who).log(ANY_PROJECT, "refused: read only")
        raise ApiError(403, read_only_message(who))
    return who


@dataclass(frozen=True)
class Access:
    """An authenticated request, checked against projects."""

    request: Request
    who: Identity

    def log(self, project: str, outcome: str = "") -> None:
        """The access log's line: user, token id, project, method and path (a flood of one
        token's lines is summarised per token, project and outcome: api/log_limits.py)."""
        log.info(
            "user=%s token=%s project=%s %s %s%s",
            self.who.name,
            self.who.token.id,
            project[:64],  # a submission's, unchecked yet
            self.request.method,
            self.request.url.path,
            f" ({outcome})" if outcome else "",
            extra={"summary_key": (self.who.token.id, project, outcome)},
        )

    def check(self, project: str | None, write: bool, missing: Callable[[], ApiError]) -> None:
        """Allow this request on a thing of `project` (None: no such thing): `missing()`
        (a 404) when it does not exist or its project is not the caller's, 403 when the
        caller may only read there and `write`."""
        if project is None or not self.who.sees(project):
            self.log(project or "-", "not found")
            raise missing()
        if write and self.who.role_in(project) == READ:
            self.log(project, "refused: read only")
            raise ApiError(403, read_only_message(self.who, project))
        self.log(project)

    def submit_project(self, asked: str) -> str:
        """The project a submission goes to: `asked`, else the caller's only project
        (an admin's: default); 400 when it must be said, 403 without a write role there."""
        if not asked:
            projects = self.who.projects
            if projects is None:
                asked = DEFAULT_PROJECT
            elif len(projects) == 1:
                asked = projects[0]
            else:
                self.log(ANY_PROJECT, "no project given")
                raise ApiError(400, f"project: give one of {', '.join(projects)}")
        role = self.who.role_in(asked)
        if role is None:
            self.log(asked, "refused: not a member")
            raise ApiError(403, f"user {self.who.name!r} has no role in project {asked[:64]!r}")
        if role == READ:
            self.log(asked, "refused: read only")
            raise ApiError(403, read_only_message(self.who, asked))
        self.log(asked)
        return asked
