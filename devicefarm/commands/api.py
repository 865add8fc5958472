"""`devicefarm api`: serve the farm's HTTP API (uvicorn), or manage its users' tokens.

devicefarm api --host 0.0.0.0 --port 8000 --db URL --broker URL --tokens FILE
    [--header-timeout-s S --max-connections N --rate-per-client R ...: api/serve_settings.py]
devicefarm api token add NAME --role admin|submit|read [--project P[:ROLE]]... \
    [--scope read|submit|admin] [--expires 30d] --tokens FILE     (prints the new token once)
devicefarm api token list|revoke ID|remove NAME ...
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from farm_core.accounts import ENV_TOKENS, PROJECT_ROLES, ROLES

from . import argtypes, common


def _tokens_file(text: str) -> str:
    """--tokens (an argparse type): a file path in a folder that exists (`token add` never
    creates folders for a path given)."""
    from delegate_runtime.printable import printable

    folder = os.path.dirname(text) or "."
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{printable(text)} is a directory; give a file path")
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"folder {printable(folder)} does not exist")
    return text


def _add_tokens(p: argparse.ArgumentParser, default: object = None) -> None:
    p.add_argument(
        "--tokens",
        default=default,
        type=_tokens_file,
        metavar="FILE",
        help=f"the users' tokens file (default: ${ENV_TOKENS} or tokens.json in $DEVICEFARM_HOME)",
    )


def _project_role(text: str) -> tuple[str, str | None]:
    """--project P[:ROLE] (an argparse type): the project and its role (None: --role's)."""
    project, _, role = text.partition(":")
    if role and role not in PROJECT_ROLES:
        raise argparse.ArgumentTypeError(f"role {role!r}: one of {', '.join(PROJECT_ROLES)}")
    return project, role or None


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = "Without an ACTION: serve the API."
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    token = sub.add_parser("token", help="add, list or revoke tokens; add or remove users")
    token_sub = token.add_subparsers(dest="token_action", metavar="TOKEN_ACTION", required=True)
    add = token_sub.add_parser(
        "add", help="a new token for a user (made, or given new roles, first); prints it once"
    )
    add.add_argument("name", help="the user's name")
    add.add_argument(
        "--role",
        choices=ROLES,
        default=None,
        help="admin (every project), or submit or read: the role in each --project without "
        "one (default project: default). An existing user given no --role or --project "
        "keeps their roles",
    )
    add.add_argument(
        "--project",
        action="append",
        default=[],
        type=_project_role,
        metavar="P[:ROLE]",
        help="a project (team) the user belongs to, with its role (submit or read; default "
        "--role). Repeatable; replaces the user's projects",
    )
    add.add_argument(
        "--scope",
        choices=ROLES,
        default=None,
        help="the most this token may do, at most the user's role (default: the user's role)",
    )
    add.add_argument(
        "--expires",
        default="never",
        metavar="WHEN",
        help="when the token stops working: a duration (90m, 12h, 30d, 2w), an ISO date "
        "(UTC), or never (default)",
    )
    revoke = token_sub.add_parser("revoke", help="revoke one token (its user stays)")
    revoke.add_argument("id", metavar="ID", help="the token's id (`token list`)")
    remove = token_sub.add_parser("remove", help="remove a user (all their tokens stop)")
    remove.add_argument("name", help="the user's name")
    listing = token_sub.add_parser(
        "list", help="users, roles and tokens: id, scope, expiry, last use, state"
    )
    for q in (add, revoke, remove, listing):
        _add_tokens(q, argparse.SUPPRESS)  # after the action too; the parent's otherwise
    _add_tokens(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=argtypes.port, default=8000, help="TCP port (default 8000)")
    p.add_argument(
        "--max-model-mb",
        type=argtypes.float_over(0.0),
        default=None,
        help="largest model upload, MiB (default: $DEVICEFARM_MAX_MODEL_MB or 128)",
    )
    p.add_argument(
        "--max-upload-mb",
        type=argtypes.float_over(0.0),
        default=None,
        help="largest request body, MiB (default: the model cap + 1)",
    )
    p.add_argument(
        "--log-level",
        choices=("critical", "error", "warning", "info", "debug"),
        default="info",
        help="server log level (default info)",
    )
    common.add_db(p)
    common.add_broker(p)
    from api import serve_settings  # stdlib only: the flags are listed without the api extra

    serve_settings.add_arguments(p)


def tokens_path(args: argparse.Namespace) -> Path:
    from farm_core.accounts import default_tokens_path

    return Path(args.tokens) if args.tokens else default_tokens_path()


def manage_tokens(args: argparse.Namespace) -> int:
    from delegate_runtime.errors import JobError
    from farm_core.accounts import AccountsError, load_accounts, save_accounts

    path = tokens_path(args)
    try:
        accounts = load_accounts(path, missing_ok=args.token_action == "add")
        if args.token_action == "list":
            print(_token_table(accounts, path), end="")
            return 0
        if args.token_action == "remove":
            save_accounts(accounts.remove(args.name), path)
            print(f"removed {args.name} and their tokens from {path}", file=sys.stderr)
            return 0
        if args.token_action == "revoke":
            accounts, user = accounts.revoke(args.id)
            save_accounts(accounts, path)
            print(f"revoked token {args.id} of {user.name} in {path}", file=sys.stderr)
            return 0
        accounts, token, secret = _add_token(accounts, args)
        save_accounts(accounts, path)
    except AccountsError as exc:
        raise JobError(str(exc)) from exc
    except OSError as exc:
        raise JobError(f"cannot write {path}: {exc.strerror or exc}") from exc
    user = accounts.get(args.name)
    expires = "never expires" if token.expires is None else f"expires {_when(token.expires)}"
    print(
        f"user {args.name} ({_roles(user)}) in {path}; token {token.id} (scope {token.scope}, "
        f"{expires}), shown once:",
        file=sys.stderr,
    )
    print(secret)
    return 0


def _add_token(accounts: Any, args: argparse.Namespace) -> tuple[Any, Any, str]:
    """The accounts with `args.name` made or re-roled as asked, and their new token."""
    from farm_core.accounts import ADMIN, DEFAULT_PROJECT, AccountsError, parse_expiry

    expires = parse_expiry(args.expires)
    if args.role == ADMIN:
        if args.project:
            raise AccountsError("an admin sees every project: give --role admin or --project")
        accounts = accounts.set_user(args.name, admin=True)
    elif args.role or args.project:
        projects = {}
        for project, role in args.project or [(DEFAULT_PROJECT, None)]:
            if not (role or args.role):
                raise AccountsError(f"--project {project}: give its role (P:ROLE) or --role")
            projects[project] = role or args.role
        accounts = accounts.set_user(args.name, projects=projects)
    elif accounts.get(args.name) is None:
        raise AccountsError(f"new user {args.name!r}: give --role (and --project P[:ROLE])")
    return accounts.add_token(args.name, args.scope, expires)


def _roles(user: Any) -> str:
    if user.admin:
        return "admin"
    return ",".join(f"{project}:{role}" for project, role in user.projects)


def _when(at: Any) -> str:
    return "-" if at is None else f"{at:%Y-%m-%d %H:%M}"


def _token_table(accounts: Any, path: Path) -> str:
    """One line per token (a user without tokens: one line), with its last use."""
    from farm_core.accounts import utcnow
    from farm_core.token_use import load_uses

    uses, now = load_uses(path), utcnow()
    head = ("USER", "ROLES", "TOKEN", "SCOPE", "CREATED", "EXPIRES", "LAST USED", "STATE")
    rows = [head]
    for user in accounts:
        for t in user.tokens or [None]:
            if t is None:
                rows.append((user.name, _roles(user), "-", "-", "-", "-", "-", "no token"))
                continue
            state = "active"
            if t.revoked is not None:
                state = f"revoked {_when(t.revoked)}"
            elif t.refusal(now):
                state = "expired"
            rows.append(
                (user.name, _roles(user), t.id, t.scope, _when(t.created), _when(t.expires),
                 _when(uses.get(t.id)), state)
            )  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines) + "\n"


def _mib(value: float | None) -> int | None:
    return None if value is None else int(value * 1024**2)


def serve(args: argparse.Namespace) -> int:
    from delegate_runtime.errors import JobError
    from farm_core.accounts import AccountsError
    from orchestrator.submit import DEFAULT_MAX_MODEL_MB

    try:
        from api.app import FarmApi, make_app
        from api.auth import TokenStore
        from api.server import fit_open_files, serve_app
    except ImportError as exc:
        raise JobError(f"the API needs {exc.name}: pip install 'devicefarm[api]'") from exc
    from api.serve_settings import from_args

    try:
        settings, note = fit_open_files(from_args(args))
    except ValueError as exc:  # a bad DEVICEFARM_API_* variable (the flags were checked)
        raise JobError(str(exc)) from exc
    if note:
        print(f"note: {note}", file=sys.stderr)
    if args.max_model_mb is not None and args.max_model_mb > DEFAULT_MAX_MODEL_MB:
        raise JobError(f"--max-model-mb must be at most {DEFAULT_MAX_MODEL_MB}")
    path = tokens_path(args)
    try:
        tokens = TokenStore(path)
    except AccountsError as exc:
        hint = " (make one: devicefarm api token add NAME --role ROLE --project P)"
        raise JobError(f"{exc}{hint if not path.exists() else ''}") from exc
    if not len(tokens.accounts()):
        print(f"warning: {path} lists no users: every request will get 401", file=sys.stderr)
    from farm_core.dispatch import CeleryDispatcher
    from farm_core.reach import reach_broker

    broker = common.broker_url(args)
    reach_broker(broker)  # once, at start, as the worker does
    farm = FarmApi(
        common.engine(args),
        CeleryDispatcher(broker),
        tokens,
        _mib(args.max_model_mb),
    )
    app = make_app(farm, _mib(args.max_upload_mb), settings)
    print(f"API on http://{args.host}:{args.port} (users: {path})", file=sys.stderr)
    sys.stderr.flush()
    serve_app(app, args.host, args.port, settings, args.log_level)
    return 0


def run(args: argparse.Namespace) -> int:
    if args.action == "token":
        return manage_tokens(args)
    return serve(args)
